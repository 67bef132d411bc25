#include "model/deepseek_v4.h"

#include <algorithm>
#include <limits>

#include "kernels/norm.h"
#include "model/batch_check.h"
#include "model/swa_replay.h"
#include "model/v4_chunk_undo.h"
#include "model/v4_norm.h"
#include "model/v4_state_slots.h"

namespace ds {

namespace {

Status check_config(const ModelConfig& c) {
  if (!c.is_v4_family()) {
    return Status(ErrorCode::model_unsupported,
                  "config.json: model_type '" + c.model_type +
                      "' is not supported by the V4 model (deepseek_v4, deepseek_v41)");
  }
  if (c.is_v41()) {
    return ok_status();  // head_dim, index_head_dim: multiples of 32 (checked by the parser)
  }
  if (c.head_dim <= c.qk_rope_head_dim || (c.head_dim - c.qk_rope_head_dim) % 64 != 0) {
    return Status(
        ErrorCode::model_unsupported,
        "config.json: head_dim - qk_rope_head_dim must be a positive multiple of 64 (FP8 KV blocks)");
  }
  if (c.num_draft_layers() > 1) {
    return Status(ErrorCode::model_unsupported,
                  "config.json: more than one draft layer (DSpark) is not supported");
  }
  return ok_status();
}

}  // namespace

DeepSeekV4::DeepSeekV4(Checkpoint ckpt, const ModelConfig& cfg, const ModelOptions& opts,
                       const V4Numerics& num)
    : ckpt_(std::move(ckpt)), cfg_(cfg), opts_(opts), num_(num), v41_(cfg.is_v41()) {
  pool_ = std::make_unique<ThreadPool>(std::max(1, opts.n_threads));
  ctx_.isa = opts.isa;
  ctx_.pool = pool_.get();
  ctx_.expert_exchange = opts.expert_exchange;
  ctx_.bf16_activations = opts.bf16_activations;
}

Result<std::unique_ptr<DeepSeekV4>> DeepSeekV4::load(const std::string& dir, const ModelOptions& opts,
                                                     const V4Numerics& num) {
  DS_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  DS_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  return load(std::move(ckpt), cfg, opts, num);
}

Result<std::unique_ptr<DeepSeekV4>> DeepSeekV4::load(Checkpoint ckpt, const ModelConfig& cfg,
                                                     const ModelOptions& opts, const V4Numerics& num) {
  DS_TRY(check_config(cfg));
  if (opts.max_seq_len <= 0) return Status(ErrorCode::invalid_argument, "max_seq_len must be > 0");
  std::unique_ptr<DeepSeekV4> m(new DeepSeekV4(std::move(ckpt), cfg, opts, num));
  DS_TRY(m->build());
  return m;
}

Status DeepSeekV4::build() {
  const ModelConfig& c = cfg_;
  if (v41_) {
    DS_ASSIGN_OR_RETURN(specs_, v41_layer_specs(c));
  } else {
    DS_ASSIGN_OR_RETURN(specs_, v4_layer_specs(c));
  }
  replay_ = SwaReplay(c, specs_, c.kv_block_size_multiple());
  if (opts_.decoder_replay.compact) {
    // Decoder replay needs V4.1's encoder-decoder split (model/decoder_replay.h).
    decoder_first_layer_ = v41_ ? decoder_first_layer(specs_, c.num_hidden_layers) : -1;
    if (decoder_first_layer_ < 0) {
      return Status(ErrorCode::model_unsupported,
                    "--yoco-prefill-truncation-mode compact: decoder SWA bounded replay needs a deepseek_v41 "
                    "model with a KV source layer (model_type '" +
                        c.model_type + "')");
    }
    if (opts_.decoder_replay.keep_tokens < c.sliding_window) {
      return Status(ErrorCode::invalid_argument,
                    "--yoco-prefill-keep-tokens " + std::to_string(opts_.decoder_replay.keep_tokens) +
                        " is below sliding_window " + std::to_string(c.sliding_window) +
                        " (the kept suffix must cover the window)");
    }
  }
  DS_ASSIGN_OR_RETURN(embed_, Embedding::load(ckpt_, "embed.weight", c.vocab_size, c.hidden_size));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    DS_ASSIGN_OR_RETURN(V4Block b, V4Block::load(ckpt_, "layers." + std::to_string(l) + ".", c, specs_[l], l,
                                                 c.is_hash_layer(l), opts_.expert_exchange));
    layers_.push_back(std::move(b));
  }
  if (v41_) {
    DS_ASSIGN_OR_RETURN(engram_, V41Engram::load(ckpt_, c, opts_.engram_token_map));
  }
  if (!v41_) {
    DS_ASSIGN_OR_RETURN(hc_head_, MhcHead::load(ckpt_, "", mhc_dims(c)));
  }
  DS_ASSIGN_OR_RETURN(final_norm_, load_f32(ckpt_, "norm.weight", Shape{c.hidden_size}));
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  DS_ASSIGN_OR_RETURN(head_, load_linear_layer(ckpt_, "head", c.vocab_size, c.hidden_size, block));
  if (!v41_ && c.num_draft_layers() == 1) {
    DS_ASSIGN_OR_RETURN(mtp_, V4Mtp::load(ckpt_, c, 0, specs_[c.num_hidden_layers]));
  }
  if (v41_ && c.dspark && c.num_draft_layers() > 0) {
    const std::span<const LayerSpec> stages(specs_.data() + c.num_hidden_layers,
                                            static_cast<size_t>(c.num_draft_layers()));
    DS_ASSIGN_OR_RETURN(dspark_, V41DSpark::load(ckpt_, c, stages));
  }
  return ok_status();
}

KvCacheLayout DeepSeekV4::kv_cache_layout() const {
  KvCacheLayout l;
  l.block_size_multiple = cfg_.kv_block_size_multiple();
  int64_t per_token_x_lcm = 0;  // paged bytes per lcm tokens (exact: every ratio divides it)
  int64_t per_seq = 0;
  const int64_t lcm = l.block_size_multiple;
  for (int layer = 0; layer < n_layer_slots(); ++layer) {
    const LayerSpec& s = specs_[layer];
    const int ratio = s.compress_ratio;
    per_seq += int64_t{cfg_.sliding_window} * (cfg_.head_dim * 4 + 8);  // ring rows + positions
    if (ratio == 0 || !s.owns_compressor()) continue;                   // V4.1 readers: only their ring
    const bool keys = s.owns_index_keys();
    per_token_x_lcm += lcm / ratio * 4 * (cfg_.head_dim + (keys ? cfg_.index_head_dim : 0));
    // compressor partial groups: kv + score, rows × coff·d_c
    const int64_t coff = s.overlap ? 2 : 1;
    per_seq += int64_t{2} * 4 * coff * ratio * coff * cfg_.head_dim;
    if (s.index_compressor) per_seq += int64_t{2} * 4 * 2 * ratio * 2 * cfg_.index_head_dim;
  }
  if (dspark_)  // the stages' context rings
    per_seq += int64_t{dspark_->n_stages()} * cfg_.sliding_window * (cfg_.head_dim * 4 + 8);
  l.bytes_per_token = (per_token_x_lcm + lcm - 1) / lcm;
  l.bytes_per_sequence = per_seq;
  l.swa_replay_tokens = replay_.tokens();
  return l;
}

Status DeepSeekV4::init_kv_cache(const KvCacheConfig& cfg) {
  const int32_t multiple = kv_cache_layout().block_size_multiple;
  if (cfg.block_size_tokens < 1 || cfg.block_size_tokens % multiple != 0) {
    return Status(ErrorCode::invalid_argument, "block_size_tokens " + std::to_string(cfg.block_size_tokens) +
                                                   " is not a positive multiple of " +
                                                   std::to_string(multiple) +
                                                   " (the lcm of the compress ratios)");
  }
  if (cfg.n_blocks < 1 || cfg.n_sequence_slots < 0) {
    return Status(ErrorCode::invalid_argument, "n_blocks must be > 0 and n_sequence_slots >= 0");
  }
  for (int layer = 0; layer < n_layer_slots(); ++layer) {
    // Readers index entries by their row in the layer's pool (int32, V4EntryPages::row_of).
    const int ratio = specs_[layer].compress_ratio;
    if (ratio > 0 &&
        int64_t{cfg.n_blocks} * (cfg.block_size_tokens / ratio) > std::numeric_limits<int32_t>::max())
      return Status(ErrorCode::invalid_argument, "n_blocks: more compressed entries than int32 row ids");
  }
  const int64_t phys = physical_memory_bytes();
  const int64_t limit = phys > 0 ? phys : std::numeric_limits<int64_t>::max();
  // Everything is allocated before anything is replaced, so an error leaves the old cache.
  std::vector<PagedLatentCache> comp(static_cast<size_t>(n_layer_slots())), idx(comp.size());
  for (int layer = 0; layer < n_layer_slots(); ++layer) {
    const int ratio = specs_[layer].compress_ratio;
    if (ratio == 0 || !specs_[layer].owns_compressor() || (layer >= cfg_.num_hidden_layers && !cfg.mtp_layer))
      continue;
    const KvCacheConfig entry_cfg{
        .block_size_tokens = cfg.block_size_tokens / ratio, .n_blocks = cfg.n_blocks, .memory = cfg.memory};
    DS_ASSIGN_OR_RETURN(comp[layer], PagedLatentCache::allocate(1, cfg_.head_dim, entry_cfg, 1, limit));
    if (specs_[layer].owns_index_keys()) {
      DS_ASSIGN_OR_RETURN(idx[layer],
                          PagedLatentCache::allocate(1, cfg_.index_head_dim, entry_cfg, 1, limit));
    }
  }
  comp_pages_ = std::move(comp);
  idx_pages_ = std::move(idx);
  kv_config_ = cfg;
  slots_.assign(static_cast<size_t>(cfg.n_sequence_slots > 0 ? cfg.n_sequence_slots : cfg.n_blocks));
  return ok_status();
}

V4LayerPages DeepSeekV4::pages_for(int layer, const int32_t* block_table) const {
  // V4.1 readers read their KV source's entries and index keys (V4: every layer its own).
  V4LayerPages p;
  const LayerSpec& s = specs_[layer];
  const int ratio = s.compress_ratio;
  const int kv = s.kv_source_layer, keys = s.index_keys_layer;
  if (kv >= 0 && !comp_pages_[kv].empty()) p.comp = V4EntryPages{comp_pages_[kv].slot(0), ratio, block_table};
  if (keys >= 0 && !idx_pages_[keys].empty())
    p.idx = V4EntryPages{idx_pages_[keys].slot(0), ratio, block_table};
  return p;
}

Status DeepSeekV4::check_batch(std::span<SequenceState* const> seqs,
                               std::span<const std::span<const int32_t>> tokens,
                               std::span<const int64_t> replay_ends, bool mtp,
                               std::span<const uint8_t> may_truncate, std::span<const uint8_t> mtp_draft) {
  block_check_.clear();
  for (size_t r = 0; r < seqs.size(); ++r) {
    const bool draft = !mtp_draft.empty() && mtp_draft[r] != 0;
    DS_TRY(check_request(seqs, tokens, r, mtp, cfg_.vocab_size, opts_.max_seq_len, draft));
    SequenceState* seq = seqs[r];
    const int64_t n = static_cast<int64_t>(tokens[r].size());
    const int64_t replay_end = replay_ends.empty() ? 0 : replay_ends[r];
    if (replay_end != 0) DS_TRY(replay_.check(*seq, replay_end, request_prefix(r)));
    if (replay_end != 0 && !may_truncate.empty() && may_truncate[r] != 0)
      return Status(ErrorCode::model_bad_input, request_prefix(r) + "may_truncate with replay_end");
    DS_TRY(slots_.check(seqs, r, replay_.starts(*seq, replay_end), request_prefix(r)));
    const int64_t base = mtp ? seq->n_mtp_tokens : seq->n_tokens;
    // Replayed rows write nothing below replay_end: those blocks belong to the shared prefix.
    const int64_t first_written = std::min(std::max(base, replay_end), base + n);
    DS_TRY(block_check_.add(static_cast<int32_t>(r), seq->block_table, first_written, base + n, kv_config_));
  }
  return block_check_.check_conflicts();
}

std::vector<RoutedExpertSet*> DeepSeekV4::routed_expert_sets() {
  std::vector<RoutedExpertSet*> out;
  for (V4Block& b : layers_) out.push_back(&b.ffn());
  return out;
}

Status DeepSeekV4::forward_idle() {
  for (const V4Block& layer : layers_) layer.ffn_idle(ctx_, num_, scratch_);
  return ok_status();
}

Status DeepSeekV4::forward(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  std::vector<SequenceState*> seqs;
  std::vector<std::span<const int32_t>> tokens;
  std::vector<int64_t> replay_ends;
  std::vector<uint8_t> may_truncate(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    seqs.push_back(requests[r].seq);
    tokens.push_back(requests[r].tokens);
    replay_ends.push_back(requests[r].replay_end);
    may_truncate[r] = requests[r].may_truncate ? 1 : 0;
  }
  DS_TRY(check_batch(seqs, tokens, replay_ends, /*mtp=*/false, may_truncate));
  if (num_.index_keys_on_group &&
      std::any_of(requests.begin(), requests.end(), [](const ForwardRequest& q) { return q.may_truncate; })) {
    return Status(ErrorCode::model_unsupported, "may_truncate with --numerics index_keys=on_group");
  }
  const int64_t d = cfg_.hidden_size, hc = cfg_.hc_mult;
  // Every request's rows go through each layer together (V4Block::forward): the MoE streams its
  // weights once per step; attention runs per sequence. first_row[r]: request r's first row.
  std::vector<V4SequenceSlot*> slots;
  std::vector<int64_t> first_row{0};
  std::vector<int32_t> pos, ids;
  const int64_t engram_keep = engram_.empty() ? 0 : engram_.rules().n_slots - 1;
  for (size_t r = 0; r < requests.size(); ++r) {
    const bool replay = replay_.starts(*seqs[r], replay_ends[r]);
    V4SequenceSlot& held = slots_.of(*seqs[r]);
    if (!replay && seqs[r]->n_tokens > 0 && held.n_tokens > seqs[r]->n_tokens) {  // checked: can_roll_back
      roll_back(held, seqs[r]->n_tokens, {specs_.data(), static_cast<size_t>(cfg_.num_hidden_layers)},
                engram_keep, hc * d);
    }
    slots.push_back(&slots_.take(*seqs[r], replay, replay_ends[r], cfg_, specs_,
                                 keeps_mtp_state()));  // slots are distinct (check_batch)
    if (requests[r].may_truncate) {
      begin_chunk_journal(*slots.back(), seqs[r]->n_tokens, tokens[r]);
    } else {
      drop_chunk_journal(*slots.back());
    }
    const int64_t n = static_cast<int64_t>(tokens[r].size());
    for (int64_t t = 0; t < n; ++t) pos.push_back(static_cast<int32_t>(seqs[r]->n_tokens + t));
    ids.insert(ids.end(), tokens[r].begin(), tokens[r].end());
    first_row.push_back(first_row.back() + n);
  }
  const int64_t n_rows = first_row.back();
  if (n_rows == 0) {  // an empty batch: no rows, no logits
    out.row_begin.assign(1, 0);
    out.hidden.reshape(Shape{0, d});
    out.logits.reshape(Shape{0, cfg_.vocab_size});
    return ok_status();
  }
  // streams: [n_rows, hc, d], every stream starts as the token's embedding e: [n_rows, d]
  float* streams = scratch_of(scratch_.streams, n_rows * hc * d);
  float* e = scratch_of(scratch_.embedded, n_rows * d);
  embed_.lookup(ids.data(), n_rows, e, d);
  // DSpark features: only for a call in which some request wants every row's hidden state (a
  // drafter's); plain decoding pays nothing for them.
  const bool features = dspark_ && std::any_of(requests.begin(), requests.end(),
                                               [](const ForwardRequest& r) { return r.all_hidden; });
  if (features) scratch_of(dspark_feat_, n_rows * static_cast<int64_t>(dspark_->target_layers().size()) * d);
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t k = 0; k < hc; ++k) std::copy_n(e + t * d, d, streams + (t * hc + k) * d);
  std::vector<V4SequenceRows> rows;
  std::vector<V41StepSelection> shared(requests.size());  // V4.1: top-k and pool, per sequence
  double* carried = nullptr;  // V4.1: block 0's attention collapses with the one-hot pre (§5.1)
  if (v41_) {
    carried = scratch_of(carried_pre_, n_rows * hc);
    for (int64_t t = 0; t < n_rows; ++t)
      for (int64_t k = 0; k < hc; ++k) carried[t * hc + k] = k == 0 ? 1.0 : 0.0;
  }
  if (!engram_.empty()) {  // each row's n-gram ids, from its sequence's history (v41_engram.h)
    const int64_t slots_per_row = engram_.rules().n_slots;
    scratch_of(engram_ids_, n_rows * slots_per_row);
    scratch_of(engram_gated_, n_rows);
    for (size_t r = 0; r < requests.size(); ++r)
      engram_ngram_ids(engram_.rules(), slots[r]->engram_history, tokens[r],
                       engram_ids_.data() + first_row[r] * slots_per_row,
                       engram_gated_.data() + first_row[r]);
  }
  // V4.1 decoder replay: rows before a request's first decoder position skip the decoder layers
  // (model/decoder_replay.h); skip[r] of request r's first rows. None skipped: the exact path.
  std::vector<int64_t> skip(requests.size(), 0);
  bool skips = false;
  if (decoder_first_layer_ >= 0) {
    for (size_t r = 0; r < requests.size(); ++r) {
      const int64_t from = decoder_first_position(opts_.decoder_replay, seqs[r]->prompt_len);
      skip[r] = std::clamp<int64_t>(from - seqs[r]->n_tokens, 0, first_row[r + 1] - first_row[r]);
      skips = skips || skip[r] > 0;
    }
  }
  const std::vector<int64_t> chunk_rows = [&] {
    std::vector<int64_t> n(requests.size());
    for (size_t r = 0; r < requests.size(); ++r) n[r] = first_row[r + 1] - first_row[r];
    return n;
  }();
  // active: the requests whose rows run the current layer (all, or after the cut those with rows)
  std::vector<size_t> active(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) active[r] = r;
  auto rows_of = [&](size_t l, size_t r) {
    V4SequenceRows sr{first_row[r], first_row[r + 1] - first_row[r], &slots[r]->layers[l],
                      pages_for(static_cast<int>(l), seqs[r]->block_table.data())};
    const int kv_source = specs_[l].kv_source_layer;
    if (kv_source >= 0 && kv_source != static_cast<int>(l)) sr.source = &slots[r]->layers[kv_source];
    sr.shared = &shared[r];
    return sr;
  };
  int64_t n_run = n_rows;  // rows that run the current layer
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (num_.index_keys_on_group && v41_ && specs_[l].owns_index_keys()) {
      // The release (model-spec §9): a KV source publishes its keys only on a step where its
      // compressor completes a group (it writes a new key).
      for (size_t r = 0; r < requests.size(); ++r) {
        const int64_t end = seqs[r]->n_tokens + chunk_rows[r];
        if (end / specs_[l].compress_ratio > slots[r]->layers[l].n_idx_keys)
          slots[r]->published_index_keys = static_cast<int>(l);
      }
    }
    bool fed = false;
    if (skips && static_cast<int>(l) == decoder_first_layer_) {
      // Every row feeds the first decoder layer's compressor (the decoder's compressed KV and index
      // keys are exact); then only each request's last rows go on.
      std::vector<V4SequenceRows> all;
      for (size_t r = 0; r < requests.size(); ++r) all.push_back(rows_of(l, r));
      layers_[l].feed_compressor(ctx_, num_, streams, n_rows, pos.data(), all, scratch_, carried);
      compact_decoder_rows(skip, first_row, streams, pos, ids, carried, features);
      n_run = first_row.back();
      active.clear();
      for (size_t r = 0; r < requests.size(); ++r)
        if (first_row[r + 1] > first_row[r]) active.push_back(r);
      fed = true;
    }
    if (engram_.applies(static_cast<int>(l)))  // on the streams before the block (§5.7)
      engram_.forward(static_cast<int>(l), ctx_, streams, n_run, engram_ids_.data(), engram_gated_.data());
    rows.clear();
    for (size_t r : active) {
      rows.push_back(rows_of(l, r));
      rows.back().compressor_fed = fed;
      const int published = slots[r]->published_index_keys;
      if (num_.index_keys_on_group && specs_[l].owns_indexer() && published >= 0) {
        rows.back().pages.idx = pages_for(published, seqs[r]->block_table.data()).idx;
        rows.back().keys_owner = &slots[r]->layers[published];
      }
    }
    if (features) capture_dspark_means(static_cast<int>(l), streams, n_run);
    if (n_run > 0)
      layers_[l].forward(ctx_, num_, streams, n_run, pos.data(), ids.data(), rows, scratch_, carried);
    if (kv_layer_done_) kv_layer_done_(static_cast<int>(l));
  }
  for (size_t r = 0; r < requests.size(); ++r)
    if (requests[r].may_truncate) end_chunk_journal(*slots[r]);
  const int64_t n_out_rows = n_run;  // rows that reached the head
  // The rows that get logits: each request's last row, or all of them (out.row_begin); with
  // decoder replay only rows that ran the decoder (a chunk wholly before the cut gets none).
  out.row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t n = first_row[r + 1] - first_row[r];
    out.row_begin.push_back(out.row_begin.back() + (requests[r].all_logits ? n : std::min<int64_t>(n, 1)));
  }
  // col: [n_out_rows, d] the collapsed streams; h: [n_out_rows, d] the final normed rows
  float* col = scratch_of(scratch_.collapsed, n_out_rows * d);
  float* h = scratch_of(scratch_.final_rows, n_out_rows * d);
  pool_->parallel_range(n_out_rows, 1, [&](int64_t t0, int64_t t1) {  // per-token arithmetic
    for (int64_t t = t0; t < t1; ++t) {
      if (v41_) {  // the last block's FFN pre, no hyper-head (§5.1)
        mhc_collapse(ctx_.isa, num_, mhc_dims(cfg_), streams + t * hc * d, carried + t * hc, col + t * d,
                     Bf16Point::head_collapse);
      } else {
        hc_head_.collapse(ctx_.isa, num_, streams + t * hc * d, col + t * d);
      }
    }
  });
  v4_rmsnorm(ctx_.isa, num_, Bf16Point::final_norm, col, n_out_rows, d, final_norm_.data(), cfg_.rms_norm_eps,
             h);

  const int64_t R = out.row_begin.back();
  float* head_in = scratch_of(scratch_.collapsed, R * d);  // [R, d] the rows that get logits (col is done)
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t n = chunk_rows[r];
    const int64_t n_out = out.row_begin[r + 1] - out.row_begin[r];
    std::copy_n(h + (first_row[r + 1] - n_out) * d, n_out * d, head_in + out.row_begin[r] * d);
    if (keeps_mtp_state()) {  // never with decoder replay (V4.1 keeps no MTP state)
      slots[r]->pending_streams.insert(slots[r]->pending_streams.end(), streams + first_row[r] * hc * d,
                                       streams + first_row[r + 1] * hc * d);
    }
    slots[r]->n_tokens += n;
    seqs[r]->n_tokens += n;
  }
  out.logits.reshape(Shape{R, cfg_.vocab_size});
  linear(ctx_, head_.w, head_in, R, d, out.logits.data(), cfg_.vocab_size);
  fill_hidden(requests, first_row, h, features, out);
  return ok_status();
}

void DeepSeekV4::capture_dspark_means(int layer, const float* streams, int64_t n) {
  const std::vector<int>& targets = dspark_->target_layers();
  const auto it = std::find(targets.begin(), targets.end(), layer);
  if (it == targets.end()) return;
  const int64_t d = cfg_.hidden_size, hc = cfg_.hc_mult;
  const int64_t width = static_cast<int64_t>(targets.size()) * d;
  const int64_t col = (it - targets.begin()) * d;
  const float inv_hc = 1.0f / static_cast<float>(hc);
  for (int64_t t = 0; t < n; ++t) {
    float* f = dspark_feat_.data() + t * width + col;
    const float* x = streams + t * hc * d;
    for (int64_t c = 0; c < d; ++c) {
      float sum = 0;
      for (int64_t k = 0; k < hc; ++k) sum += x[k * d + c];
      f[c] = sum * inv_hc;
    }
  }
}

void DeepSeekV4::fill_hidden(std::span<const ForwardRequest> requests, const std::vector<int64_t>& first_row,
                             const float* h, bool features, LogitsOutput& out) {
  const int64_t d = cfg_.hidden_size;
  out.hidden_row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t n =
        requests[r].all_hidden ? first_row[r + 1] - first_row[r] : out.row_begin[r + 1] - out.row_begin[r];
    out.hidden_row_begin.push_back(out.hidden_row_begin.back() + n);
  }
  const int64_t RH = out.hidden_row_begin.back();
  out.hidden.reshape(Shape{RH, d});
  // The source rows of every hidden row, in order: each request's last n rows.
  std::vector<int64_t> src;
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t n = out.hidden_row_begin[r + 1] - out.hidden_row_begin[r];
    for (int64_t t = first_row[r + 1] - n; t < first_row[r + 1]; ++t) src.push_back(t);
  }
  if (!features) {
    for (int64_t i = 0; i < RH; ++i) std::copy_n(h + src[i] * d, d, out.hidden.data() + i * d);
    return;
  }
  const int64_t width = static_cast<int64_t>(dspark_->target_layers().size()) * d;
  std::vector<float> f(static_cast<size_t>(RH * width));
  for (int64_t i = 0; i < RH; ++i)
    std::copy_n(dspark_feat_.data() + src[i] * width, width, f.data() + i * width);
  dspark_->context_features(ctx_, num_, f.data(), RH, out.hidden.data());
}

void DeepSeekV4::compact_decoder_rows(std::span<const int64_t> skip, std::vector<int64_t>& first_row,
                                      float* streams, std::vector<int32_t>& pos, std::vector<int32_t>& ids,
                                      double* carried, bool features) {
  const int64_t hc = cfg_.hc_mult, w = hc * cfg_.hidden_size;
  const int64_t slots_per_row = engram_.empty() ? 0 : engram_.rules().n_slots;
  int64_t to = 0;
  std::vector<int64_t> kept_first{0};
  for (size_t r = 0; r + 1 < first_row.size(); ++r) {
    for (int64_t from = first_row[r] + skip[r]; from < first_row[r + 1]; ++from, ++to) {
      if (from == to) continue;  // rows only move towards the front
      std::copy_n(streams + from * w, w, streams + to * w);
      pos[to] = pos[from];
      ids[to] = ids[from];
      if (carried != nullptr) std::copy_n(carried + from * hc, hc, carried + to * hc);
      if (features) {  // DSpark stream means captured before the cut (a target layer before it)
        const int64_t fw = static_cast<int64_t>(dspark_->target_layers().size()) * cfg_.hidden_size;
        std::copy_n(dspark_feat_.data() + from * fw, fw, dspark_feat_.data() + to * fw);
      }
      if (slots_per_row > 0) {
        std::copy_n(engram_ids_.data() + from * slots_per_row, slots_per_row,
                    engram_ids_.data() + to * slots_per_row);
        engram_gated_[to] = engram_gated_[from];
      }
    }
    kept_first.push_back(to);
  }
  first_row = std::move(kept_first);
}

Status DeepSeekV4::extend(SequenceState& seq, int64_t pos, std::span<const float> features) {
  const int64_t d = cfg_.hidden_size;
  if (!dspark_) return Status(ErrorCode::model_unsupported, "checkpoint has no DSpark stages");
  if (seq.state_slot < 0 || static_cast<size_t>(seq.state_slot) >= slots_.size() ||
      features.size() % d != 0 || pos < 0) {
    return Status(ErrorCode::model_bad_input, "DSpark extend: bad state slot, position or feature rows");
  }
  V4SequenceSlot& slot = slots_.of(seq);
  if (slot.dspark_layers.empty() || pos != slot.n_dspark_tokens) {  // a new context (or a restart)
    dspark_->reset_rings(slot.dspark_layers);
    slot.n_dspark_tokens = pos;
  }
  const int64_t n = static_cast<int64_t>(features.size()) / d;
  // Only the last `window` positions can stay in a ring: the earlier ones would be overwritten.
  const int64_t skip = std::max<int64_t>(0, n - cfg_.sliding_window);
  std::vector<int32_t> at;
  for (int64_t t = skip; t < n; ++t) at.push_back(static_cast<int32_t>(pos + t));
  dspark_->inject(ctx_, num_, features.data() + skip * d, n - skip, at.data(), slot.dspark_layers, scratch_);
  slot.n_dspark_tokens = pos + n;
  return ok_status();
}

int64_t DeepSeekV4::fed(const SequenceState& seq) const {
  if (seq.state_slot < 0 || static_cast<size_t>(seq.state_slot) >= slots_.size()) return 0;
  const V4SequenceSlot& slot = slots_.of(seq);
  return slot.dspark_layers.empty() ? 0 : slot.n_dspark_tokens;
}

Status DeepSeekV4::draft(std::span<const DraftBlockRequest> requests, DraftBlockOutput& out) {
  if (!dspark_) return Status(ErrorCode::model_unsupported, "checkpoint has no DSpark stages");
  const int64_t d = cfg_.hidden_size, hc = cfg_.hc_mult, B = dspark_->block_size();
  std::vector<std::vector<V4LayerState>*> rings;
  std::vector<int32_t> pos, ids;
  for (size_t r = 0; r < requests.size(); ++r) {
    const DraftBlockRequest& q = requests[r];
    const std::string which = "draft block request " + std::to_string(r) + ": ";
    if (q.seq == nullptr || q.seq->state_slot < 0 || static_cast<size_t>(q.seq->state_slot) >= slots_.size())
      return Status(ErrorCode::model_bad_input, which + "no state slot");
    V4SequenceSlot& slot = slots_.of(*q.seq);
    if (slot.dspark_layers.empty() || q.pos != slot.n_dspark_tokens || q.anchor < 0 ||
        q.anchor >= cfg_.vocab_size) {
      return Status(ErrorCode::model_bad_input, which + "anchor position " + std::to_string(q.pos) +
                                                    " is not the " + std::to_string(slot.n_dspark_tokens) +
                                                    " positions fed, or the anchor id is out of range");
    }
    rings.push_back(&slot.dspark_layers);
    for (int64_t j = 0; j < B; ++j) {
      pos.push_back(static_cast<int32_t>(q.pos + j));
      ids.push_back(j == 0 ? q.anchor : dspark_->noise_token());
    }
  }
  const int64_t n_rows = static_cast<int64_t>(ids.size());
  out.hidden.reshape(Shape{n_rows, d});
  out.logits.reshape(Shape{n_rows, cfg_.vocab_size});
  if (n_rows == 0) return ok_status();
  float* streams = scratch_of(scratch_.streams, n_rows * hc * d);
  float* e = scratch_of(scratch_.embedded, n_rows * d);
  embed_.lookup(ids.data(), n_rows, e, d);
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t k = 0; k < hc; ++k) std::copy_n(e + t * d, d, streams + (t * hc + k) * d);
  double* carried = scratch_of(carried_pre_, n_rows * hc);
  dspark_->forward(ctx_, num_, streams, static_cast<int64_t>(requests.size()), pos.data(), ids.data(), rings,
                   carried, out.hidden.data(), scratch_);
  linear(ctx_, head_.w, out.hidden.data(), n_rows, d, out.logits.data(), cfg_.vocab_size);
  return ok_status();
}

void DeepSeekV4::add_markov_bias(int32_t prev, std::span<float> logits) {
  dspark_->add_markov_bias(ctx_, prev, logits.data());
}

float DeepSeekV4::confidence(std::span<const float> h, int32_t prev) const {
  return dspark_->confidence(h.data(), prev);
}

}  // namespace ds
