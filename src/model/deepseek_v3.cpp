#include "model/deepseek_v3.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/norm.h"
#include "kernels/rope.h"
#include "model/batch_check.h"

namespace ds {

namespace {

Status unsupported(const std::string& what) {
  return Status(ErrorCode::model_unsupported, "config.json: " + what);
}

Status check_config(const ModelConfig& c) {
  if (c.model_type != "deepseek_v3" && c.model_type != "deepseek_v2") {
    return unsupported("model_type '" + c.model_type + "' is not supported by the V3 model (deepseek_v3)");
  }
  if (c.hidden_act != "silu") return unsupported("hidden_act '" + c.hidden_act + "' (only silu)");
  if (!c.rope_scaling.type.empty() && c.rope_scaling.type != "yarn") {
    return unsupported("rope_scaling.type '" + c.rope_scaling.type + "' (only yarn)");
  }
  if (c.qk_rope_head_dim <= 0 || c.qk_rope_head_dim % 2 != 0) {
    return Status(ErrorCode::weights_bad_config, "config.json: qk_rope_head_dim must be even and > 0");
  }
  if (c.hidden_size <= 0 || c.vocab_size <= 0 || c.num_attention_heads <= 0 || c.kv_lora_rank <= 0 ||
      c.num_hidden_layers <= 0) {
    return Status(ErrorCode::weights_bad_config,
                  "config.json: hidden_size, vocab_size, num_attention_heads, kv_lora_rank and "
                  "num_hidden_layers must be > 0");
  }
  if (!c.quantization.quant_method.empty() && c.quantization.block_rows != c.quantization.block_cols) {
    return unsupported("quantization_config.weight_block_size must be square");
  }
  return ok_status();
}

Status bad_input(const std::string& what) { return Status(ErrorCode::model_bad_input, what); }

}  // namespace

DeepSeekV3::DeepSeekV3(Checkpoint ckpt, const ModelConfig& cfg, const ModelOptions& opts)
    : ckpt_(std::move(ckpt)), cfg_(cfg), opts_(opts) {
  pool_ = std::make_unique<ThreadPool>(std::max(1, opts.n_threads));
  ctx_.isa = opts.isa;
  ctx_.pool = pool_.get();
  ctx_.expert_exchange = opts.expert_exchange;
  ctx_.bf16_activations = opts.bf16_activations;
}

Result<std::unique_ptr<DeepSeekV3>> DeepSeekV3::load(const std::string& dir, const ModelOptions& opts) {
  DS_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  DS_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  return load(std::move(ckpt), cfg, opts);
}

Result<std::unique_ptr<DeepSeekV3>> DeepSeekV3::load(Checkpoint ckpt, const ModelConfig& cfg,
                                                     const ModelOptions& opts) {
  DS_TRY(check_config(cfg));
  if (opts.max_seq_len <= 0) return Status(ErrorCode::invalid_argument, "max_seq_len must be > 0");
  std::unique_ptr<DeepSeekV3> m(new DeepSeekV3(std::move(ckpt), cfg, opts));
  DS_TRY(m->build());
  return m;
}

Status DeepSeekV3::build() {
  const ModelConfig& c = cfg_;
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  dims_ = MlaDims::from_config(c);

  RopeParams rp;
  rp.rope_dim = c.qk_rope_head_dim;
  rp.theta = c.rope_theta;
  if (c.rope_scaling.type == "yarn") {  // numerics.md: whenever the config says yarn
    rp.yarn_factor = c.rope_scaling.factor;
    rp.yarn_original_max_pos = c.rope_scaling.original_max_position_embeddings;
    rp.yarn_beta_fast = c.rope_scaling.beta_fast;
    rp.yarn_beta_slow = c.rope_scaling.beta_slow;
  }
  inv_freq_ = rope_inv_freq(rp);

  DS_ASSIGN_OR_RETURN(embed_,
                      Embedding::load(ckpt_, "model.embed_tokens.weight", c.vocab_size, c.hidden_size));
  layers_.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    DS_ASSIGN_OR_RETURN(DecoderLayer layer,
                        DecoderLayer::load(ckpt_, l, c, dims_, block, opts_.expert_exchange));
    layers_.push_back(std::move(layer));
  }
  DS_ASSIGN_OR_RETURN(final_norm_, load_f32(ckpt_, "model.norm.weight", Shape{c.hidden_size}));
  if (ckpt_.find("lm_head.weight") == nullptr && c.tie_word_embeddings) {
    const TensorEntry& e = embed_.entry();
    if (e.dtype == DType::f16) return unsupported("tied F16 embeddings as lm_head");
    head_ = WeightMatrix{e.dtype == DType::bf16 ? WeightFormat::bf16 : WeightFormat::f32, e.data,
                         c.vocab_size, c.hidden_size};
  } else {
    DS_ASSIGN_OR_RETURN(lm_head_, load_linear_layer(ckpt_, "lm_head", c.vocab_size, c.hidden_size, block));
    head_ = lm_head_->w;
  }
  if (c.num_nextn_predict_layers > 0) {
    DS_ASSIGN_OR_RETURN(mtp_, MtpLayer::load(ckpt_, c, dims_, block, embed_, head_));
  }
  return ok_status();
}

KvCacheLayout DeepSeekV3::kv_cache_layout() const {
  KvCacheLayout l;
  l.block_size_multiple = 1;  // V3 has no compressed caches: any block size works
  l.bytes_per_token = static_cast<int64_t>(sizeof(float)) * dims_.latent_row() * n_cache_slots();
  l.bytes_per_sequence = 0;
  return l;
}

Status DeepSeekV3::init_kv_cache(const KvCacheConfig& cfg) {
  const int64_t phys = physical_memory_bytes();
  const int64_t limit = phys > 0 ? phys : std::numeric_limits<int64_t>::max();
  // The new storage is allocated before the old is freed, so an error leaves the old cache in
  // place (large allocations are mapped lazily: the new pages cost nothing until written).
  DS_ASSIGN_OR_RETURN(PagedLatentCache fresh,
                      PagedLatentCache::allocate(n_cache_slots(), dims_.latent_row(), cfg,
                                                 kv_cache_layout().block_size_multiple, limit));
  kv_ = std::move(fresh);
  kv_config_ = cfg;
  return ok_status();
}

Status DeepSeekV3::plan_batch(std::span<SequenceState* const> seqs,
                              std::span<const std::span<const int32_t>> tokens, bool mtp) {
  chunks_.clear();
  pos_.clear();
  block_tables_.clear();
  block_check_.clear();
  int64_t row = 0;
  for (size_t r = 0; r < seqs.size(); ++r) {
    const bool draft = mtp && r < mtp_draft_.size() && mtp_draft_[r] != 0;
    DS_TRY(check_request(seqs, tokens, r, mtp, cfg_.vocab_size, opts_.max_seq_len, draft));
    SequenceState* seq = seqs[r];
    const int64_t n = static_cast<int64_t>(tokens[r].size());
    const int64_t base = mtp ? seq->n_mtp_tokens : seq->n_tokens;
    DS_TRY(block_check_.add(static_cast<int32_t>(r), seq->block_table, base, base + n, kv_config_));
    chunks_.push_back(SeqChunk{row, n, base});
    block_tables_.push_back(seq->block_table.data());
    for (int64_t i = 0; i < n; ++i) pos_.push_back(static_cast<int32_t>(base + i));
    row += n;
  }
  return block_check_.check_conflicts();
}

Status DeepSeekV3::forward(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  seqs_.clear();
  tokens_.clear();
  for (const auto& r : requests) {
    seqs_.push_back(r.seq);
    tokens_.push_back(r.tokens);
  }
  DS_TRY(plan_batch(seqs_, tokens_, /*mtp=*/false));
  if (requests.empty()) {  // nothing to run (and no cache slot to name before init_kv_cache)
    out.row_begin.assign(1, 0);
    out.hidden_row_begin.assign(1, 0);
    out.logits.reshape(Shape{0, cfg_.vocab_size});
    out.hidden.reshape(Shape{0, cfg_.hidden_size});
    return ok_status();
  }
  const int64_t H = cfg_.hidden_size;
  const int64_t T = static_cast<int64_t>(pos_.size());

  // x: [T, H] residual stream
  x_.reshape(Shape{T, H});
  for (size_t r = 0; r < requests.size(); ++r) {
    embed_.lookup(tokens_[r].data(), chunks_[r].n_rows, x_.row(chunks_[r].row_begin), H);
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const AttentionBatch batch{chunks_, pos_.data(), block_tables_, kv_.slot(static_cast<int>(l)), T};
    layers_[l].forward(ctx_, opts_.mla_mode, batch, inv_freq_, x_.data(), layer_scratch_);
    if (kv_layer_done_) kv_layer_done_(static_cast<int>(l));
  }

  // Rows that produce logits: all of a chunk, or its last.
  out.row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t n_out = requests[r].all_logits ? chunks_[r].n_rows : 1;
    out.row_begin.push_back(out.row_begin.back() + n_out);
  }
  const int64_t R = out.row_begin.back();
  sel_.reshape(Shape{R, H});
  for (size_t r = 0; r < requests.size(); ++r) {
    const SeqChunk& c = chunks_[r];
    const int64_t first = requests[r].all_logits ? c.row_begin : c.row_begin + c.n_rows - 1;
    const int64_t n_out = out.row_begin[r + 1] - out.row_begin[r];
    std::memcpy(sel_.row(out.row_begin[r]), x_.row(first), static_cast<size_t>(n_out * H) * sizeof(float));
  }
  normed_.reshape(Shape{R, H});
  rmsnorm(ctx_.isa, sel_.data(), R, H, H, final_norm_.data(), static_cast<float>(cfg_.rms_norm_eps),
          normed_.data(), H);
  fill_hidden(requests, out);
  out.logits.reshape(Shape{R, cfg_.vocab_size});
  linear(ctx_, head_, normed_.data(), R, H, out.logits.data(), cfg_.vocab_size);

  for (size_t r = 0; r < requests.size(); ++r) seqs_[r]->n_tokens += chunks_[r].n_rows;
  return ok_status();
}

void DeepSeekV3::fill_hidden(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  const int64_t H = cfg_.hidden_size;
  const bool post_norm = opts_.mtp_input == MtpInput::post_norm;
  bool any_all_hidden = false;
  for (const ForwardRequest& r : requests) any_all_hidden = any_all_hidden || (r.all_hidden && !r.all_logits);
  if (!any_all_hidden) {  // the logits rows: sel_ (pre-norm) or normed_ (post-norm)
    out.hidden_row_begin = out.row_begin;
    const int64_t R = out.row_begin.back();
    out.hidden.reshape(Shape{R, H});
    const TensorF32& mtp_in = post_norm ? normed_ : sel_;
    std::memcpy(out.hidden.data(), mtp_in.data(), static_cast<size_t>(R * H) * sizeof(float));
    return;
  }
  // Some request wants every row: gather those rows from the residual stream and norm them the same
  // way (rmsnorm is per row, so a row's hidden state does not depend on which rows were gathered).
  out.hidden_row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const bool all = requests[r].all_hidden || requests[r].all_logits;
    out.hidden_row_begin.push_back(out.hidden_row_begin.back() + (all ? chunks_[r].n_rows : 1));
  }
  const int64_t RH = out.hidden_row_begin.back();
  hidden_sel_.reshape(Shape{RH, H});
  for (size_t r = 0; r < requests.size(); ++r) {
    const SeqChunk& c = chunks_[r];
    const int64_t n_out = out.hidden_row_begin[r + 1] - out.hidden_row_begin[r];
    const int64_t first = c.row_begin + c.n_rows - n_out;
    std::memcpy(hidden_sel_.row(out.hidden_row_begin[r]), x_.row(first),
                static_cast<size_t>(n_out * H) * sizeof(float));
  }
  out.hidden.reshape(Shape{RH, H});
  if (post_norm) {
    rmsnorm(ctx_.isa, hidden_sel_.data(), RH, H, H, final_norm_.data(), static_cast<float>(cfg_.rms_norm_eps),
            out.hidden.data(), H);
  } else {
    std::memcpy(out.hidden.data(), hidden_sel_.data(), static_cast<size_t>(RH * H) * sizeof(float));
  }
}

std::vector<RoutedExpertSet*> DeepSeekV3::routed_expert_sets() {
  std::vector<RoutedExpertSet*> out;
  for (DecoderLayer& l : layers_)
    if (Moe* m = l.moe()) out.push_back(m);
  return out;
}

Status DeepSeekV3::forward_idle() {
  for (const DecoderLayer& layer : layers_) layer.moe_idle(ctx_, layer_scratch_);
  return ok_status();
}

Status DeepSeekV3::forward_mtp_idle() {
  if (!mtp_)
    return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer (num_nextn_predict_layers 0)");
  mtp_->moe_idle(ctx_, layer_scratch_);
  return ok_status();
}

Status DeepSeekV3::set_mtp_draft_vocab(std::span<const int32_t> ids) {
  if (!mtp_)
    return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer (num_nextn_predict_layers 0)");
  return mtp_->set_draft_vocab(ids);
}

Status DeepSeekV3::forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) {
  if (!mtp_)
    return Status(ErrorCode::model_unsupported, "checkpoint has no MTP layer (num_nextn_predict_layers 0)");
  seqs_.clear();
  tokens_.clear();
  mtp_draft_.clear();
  for (size_t r = 0; r < requests.size(); ++r) {
    if (requests[r].hidden == nullptr)
      return bad_input("request " + std::to_string(r) + ": no hidden states");
    seqs_.push_back(requests[r].seq);
    tokens_.push_back(requests[r].next_tokens);
    mtp_draft_.push_back(requests[r].draft ? 1 : 0);
  }
  const Status planned = plan_batch(seqs_, tokens_, /*mtp=*/true);
  mtp_draft_.clear();
  DS_TRY(planned);
  if (requests.empty()) {
    out.row_begin.assign(1, 0);
    out.hidden_row_begin.assign(1, 0);
    out.logits.reshape(Shape{0, cfg_.vocab_size});
    out.hidden.reshape(Shape{0, cfg_.hidden_size});
    return ok_status();
  }
  const int64_t H = cfg_.hidden_size;
  const int64_t T = static_cast<int64_t>(pos_.size());

  // Concatenate every request's tokens and hidden rows: flat_tokens_ [T], sel_ [T, H].
  flat_tokens_.clear();
  sel_.reshape(Shape{T, H});
  out.row_begin.assign(1, 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    const SeqChunk& c = chunks_[r];
    flat_tokens_.insert(flat_tokens_.end(), tokens_[r].begin(), tokens_[r].end());
    std::memcpy(sel_.row(c.row_begin), requests[r].hidden, static_cast<size_t>(c.n_rows * H) * sizeof(float));
    out.row_begin.push_back(out.row_begin.back() + (requests[r].all_logits ? c.n_rows : 1));
  }
  const AttentionBatch batch{chunks_, pos_.data(), block_tables_, kv_.slot(cfg_.num_hidden_layers), T};
  mtp_->block(ctx_, opts_.mla_mode, batch, inv_freq_, flat_tokens_.data(), sel_.data(), mtp_scratch_,
              layer_scratch_);
  // x_: [R, H] the MTP block's output rows that get logits (all of a request's, or its last).
  const int64_t R = out.row_begin.back();
  x_.reshape(Shape{R, H});
  for (size_t r = 0; r < requests.size(); ++r) {
    const SeqChunk& c = chunks_[r];
    const int64_t n_out = out.row_begin[r + 1] - out.row_begin[r];
    std::memcpy(x_.row(out.row_begin[r]), mtp_scratch_.x.row(c.row_begin + c.n_rows - n_out),
                static_cast<size_t>(n_out * H) * sizeof(float));
  }
  normed_.reshape(Shape{R, H});
  if (requests.front().draft_vocab && mtp_->draft_vocab_size() > 0) {
    out.logits.reshape(Shape{R, mtp_->draft_vocab_size()});
    mtp_->draft_head(ctx_, x_.data(), R, normed_.data(), out.logits.data());
  } else {
    out.logits.reshape(Shape{R, cfg_.vocab_size});
    mtp_->head(ctx_, x_.data(), R, normed_.data(), out.logits.data());
  }
  // The next MTP step's input, in the convention the main model feeds it (ModelOptions::mtp_input).
  out.hidden_row_begin = out.row_begin;
  out.hidden.reshape(Shape{R, H});
  const TensorF32& next_in = opts_.mtp_input == MtpInput::post_norm ? normed_ : x_;
  std::memcpy(out.hidden.data(), next_in.data(), static_cast<size_t>(R * H) * sizeof(float));
  for (size_t r = 0; r < requests.size(); ++r) seqs_[r]->n_mtp_tokens += chunks_[r].n_rows;
  return ok_status();
}

}  // namespace ds
