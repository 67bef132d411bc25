#include "model/v4_attention.h"
#include "model/v4_norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/sparse_attention.h"

namespace ds {

Result<V4Attention> V4Attention::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                      const LayerSpec& spec) {
  V4Attention a;
  a.hidden_ = c.hidden_size;
  a.n_heads_ = c.num_attention_heads;
  a.head_dim_ = c.head_dim;
  a.rope_dim_ = c.qk_rope_head_dim;
  a.q_lora_ = c.q_lora_rank;
  a.o_groups_ = c.o_groups;
  a.o_lora_ = c.o_lora_rank;
  a.window_ = c.sliding_window;
  a.ratio_ = spec.compress_ratio;
  a.window_quant_ = spec.window_kv;
  a.v41_ = c.is_v41();
  a.q_head_norm_ = !a.v41_;
  a.eps_ = c.rms_norm_eps;
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;

  RopeParams rp;
  rp.rope_dim = static_cast<int>(a.rope_dim_);
  if (a.ratio_ > 0) {
    rp.theta = c.compress_rope_theta;
    if (c.rope_scaling.type == "yarn") {
      rp.yarn_factor = c.rope_scaling.factor;
      rp.yarn_original_max_pos = c.rope_scaling.original_max_position_embeddings;
      rp.yarn_beta_fast = c.rope_scaling.beta_fast;
      rp.yarn_beta_slow = c.rope_scaling.beta_slow;
    }
  } else {
    rp.theta = c.rope_theta;  // window-only layers: plain RoPE (the reference's freqs_swa)
  }
  a.inv_freq_ = rope_inv_freq(rp);

  const int64_t hd = a.n_heads_ * a.head_dim_;
  DS_ASSIGN_OR_RETURN(a.wq_a_, load_linear_layer(ckpt, prefix + "wq_a", a.q_lora_, a.hidden_, block));
  DS_ASSIGN_OR_RETURN(a.wq_b_, load_linear_layer(ckpt, prefix + "wq_b", hd, a.q_lora_, block));
  DS_ASSIGN_OR_RETURN(a.wkv_, load_linear_layer(ckpt, prefix + "wkv", a.head_dim_, a.hidden_, block));
  DS_ASSIGN_OR_RETURN(
      a.wo_a_, load_linear_layer(ckpt, prefix + "wo_a", a.o_groups_ * a.o_lora_, hd / a.o_groups_, block));
  DS_ASSIGN_OR_RETURN(a.wo_b_,
                      load_linear_layer(ckpt, prefix + "wo_b", a.hidden_, a.o_groups_ * a.o_lora_, block));
  DS_ASSIGN_OR_RETURN(a.q_norm_, load_f32(ckpt, prefix + "q_norm.weight", Shape{a.q_lora_}));
  DS_ASSIGN_OR_RETURN(a.kv_norm_, load_f32(ckpt, prefix + "kv_norm.weight", Shape{a.head_dim_}));
  a.slice_wo_a();
  DS_ASSIGN_OR_RETURN(a.sink_, load_f32_param(ckpt, prefix + "attn_sink", Shape{a.n_heads_}));
  if (a.ratio_ > 0 && spec.owns_compressor()) {
    V4CompressorDims cd{a.ratio_,  spec.overlap, a.head_dim_, a.rope_dim_,
                        a.hidden_, a.eps_,       false,       spec.compressed_kv};
    cd.has_ape = !a.v41_;                // V4.1: no ape (§5.4)
    cd.gated = !a.v41_ || a.ratio_ > 1;  // V4.1 ratio 1: no gate
    DS_ASSIGN_OR_RETURN(a.compressor_, V4Compressor::load(ckpt, prefix + "compressor.", cd));
  }
  if (a.ratio_ > 0 && spec.owns_indexer()) {
    DS_ASSIGN_OR_RETURN(a.indexer_, V4Indexer::load(ckpt, prefix + "indexer.", c, spec));
  }
  if (a.v41_ && a.ratio_ > 0 && spec.owns_index_keys()) {
    DS_ASSIGN_OR_RETURN(a.index_keys_, V41IndexKeys::load(ckpt, prefix + "indexer.", c, spec));
  }
  return a;
}

void V4Attention::slice_wo_a() {
  const WeightMatrix& w = wo_a_.w;
  const int64_t gw = w.cols;  // H·D / o_groups
  const bool f32_or_bf16 = w.format == WeightFormat::f32 || w.format == WeightFormat::bf16;
  const bool fp8_blocks = w.format == WeightFormat::fp8_e4m3_block && o_lora_ % w.block_rows == 0;
  if (!f32_or_bf16 && !fp8_blocks) wo_a_f32_ = dequantize_to_f32(w);
  wo_a_groups_.clear();
  for (int64_t g = 0; g < o_groups_; ++g) {
    if (!wo_a_f32_.empty()) {
      wo_a_groups_.push_back(
          WeightMatrix{WeightFormat::f32, wo_a_f32_.data() + g * o_lora_ * gw, o_lora_, gw});
      continue;
    }
    WeightMatrix s = w;
    s.rows = o_lora_;
    const int64_t elem = w.format == WeightFormat::f32 ? 4 : w.format == WeightFormat::bf16 ? 2 : 1;
    s.data = static_cast<const uint8_t*>(w.data) + g * o_lora_ * gw * elem;
    if (fp8_blocks) s.scales = w.scales + g * (o_lora_ / w.block_rows) * w.scale_cols();
    wo_a_groups_.push_back(s);
  }
}

void V4Attention::selection(const ForwardContext& ctx, const V4Numerics& num, const Projections& p, int64_t n,
                            const int32_t* pos, const V4SequenceRows& rows, int64_t n_entries,
                            std::vector<std::vector<int32_t>>& selected) const {
  const V4LayerState& src = rows.source != nullptr ? *rows.source : *rows.state;
  if (indexer_ && !v41_) {
    indexer_->select(ctx, num, p.key_kv, p.key_score, p.iq, p.iw, n, pos, inv_freq_, *rows.state,
                     rows.pages.idx, selected);
  } else if (indexer_) {
    const int64_t n_keys = rows.keys_owner != nullptr ? rows.keys_owner->n_idx_keys : src.n_idx_keys;
    indexer_->select_v41(ctx, p.iq, p.iw, n, pos, rows.pages.idx, n_keys, *rows.shared, selected);
    rows.shared->topk = selected;  // the layers up to the next index source reuse it
  } else if (v41_) {
    selected = rows.shared->topk;
  } else {  // V4 HCA: every visible entry
    selected.assign(static_cast<size_t>(n), {});
    for (int64_t t = 0; t < n; ++t) {
      const int64_t vis = std::min<int64_t>((pos[t] + 1) / ratio_, n_entries);
      for (int32_t j = 0; j < vis; ++j) selected[t].push_back(j);
    }
  }
}

void V4Attention::compress(const ForwardContext& ctx, const V4Numerics& num, const float* kv,
                           const float* score, int64_t n, const int32_t* pos, const V4SequenceRows& rows,
                           V4Scratch& scratch) const {
  const int64_t D = head_dim_;
  V4LayerState& st = *rows.state;
  const V4LayerPages& pages = rows.pages;
  std::vector<float>& new_kv = scratch.new_kv;  // [n_new, D]
  std::vector<float> latent;                    // V4.1: before RoPE, for the index keys
  std::vector<int32_t> entry_pos;
  compressor_->feed(ctx, num, kv, score, n, pos, inv_freq_, st.comp, st.n_entries, new_kv,
                    index_keys_ ? &latent : nullptr, index_keys_ ? &entry_pos : nullptr);
  const int64_t n_new = static_cast<int64_t>(new_kv.size()) / D;
  pages.comp.write(st.n_entries, n_new, new_kv.data());
  st.n_entries += n_new;
  if (index_keys_) {  // published every step, so decode equals prefill (model-spec §9)
    std::vector<float> keys;
    index_keys_->make(ctx, num, latent.data(), n_new, entry_pos.data(), inv_freq_, keys);
    pages.idx.write(st.n_idx_keys, n_new, keys.data());
    st.n_idx_keys += n_new;
  }
}

void V4Attention::feed_compressor(const ForwardContext& ctx, const V4Numerics& num, const float* x,
                                  const int32_t* pos, std::span<const V4SequenceRows> seqs,
                                  V4Scratch& scratch) const {
  if (!compressor_ || seqs.empty()) return;
  const int64_t n_rows = seqs.back().first_row + seqs.back().n;  // the step rows up to the last sequence's
  const Projections p = project_compressor(ctx, x, n_rows, seqs, /*skip_fed=*/false, scratch);
  for (const V4SequenceRows& s : seqs) {
    const Projections r = p.from_row(s.first_row);
    compress(ctx, num, r.comp_kv, r.comp_score, s.n, pos + s.first_row, s, scratch);
  }
}

V4Attention::Projections V4Attention::Projections::from_row(int64_t row) const {
  Projections p = *this;
  auto shift = [row](const float*& ptr, int64_t width) {
    if (ptr != nullptr) ptr += row * width;
  };
  shift(p.comp_kv, comp_width);
  shift(p.comp_score, comp_width);
  shift(p.key_kv, key_width);
  shift(p.key_score, key_width);
  shift(p.iq, iq_width);
  shift(p.iw, iw_width);
  return p;
}

V4Attention::Projections V4Attention::project_compressor(const ForwardContext& ctx, const float* x,
                                                         int64_t n_rows, std::span<const V4SequenceRows> seqs,
                                                         bool skip_fed, V4Scratch& scratch) const {
  Projections p;
  if (!compressor_ || seqs.empty()) return p;
  const int64_t w = compressor_->width();
  float* kv = scratch_of(scratch.comp_kv, n_rows * w);
  float* score = scratch_of(scratch.comp_score, n_rows * w);
  p.comp_kv = kv;
  p.comp_score = score;
  p.comp_width = w;
  // Runs of consecutive sequences to project (with skip_fed, those whose compressor has not
  // consumed their chunk yet: all but a V4.1 decoder replay's): one call per run, one in the
  // common case.
  auto needed = [&](const V4SequenceRows& s) { return !(skip_fed && s.compressor_fed); };
  for (size_t i = 0; i < seqs.size();) {
    if (!needed(seqs[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < seqs.size() && needed(seqs[j])) ++j;
    const int64_t first = seqs[i].first_row, count = seqs[j - 1].first_row + seqs[j - 1].n - first;
    compressor_->project(ctx, x + first * hidden_, count, kv + first * w, score + first * w);
    i = j;
  }
  return p;
}

V4Attention::Projections V4Attention::project(const ForwardContext& ctx, const V4Numerics& num,
                                              const float* x, const float* qr, int64_t n_rows,
                                              const int32_t* pos, std::span<const V4SequenceRows> seqs,
                                              V4Scratch& scratch) const {
  Projections p = project_compressor(ctx, x, n_rows, seqs, /*skip_fed=*/true, scratch);
  if (!indexer_) return p;
  if (!v41_) {  // V4: the indexer's own key compressor
    const V4Compressor& kc = indexer_->key_compressor();
    p.key_width = kc.width();
    float* kv = scratch_of(scratch.key_kv, n_rows * p.key_width);
    float* score = scratch_of(scratch.key_score, n_rows * p.key_width);
    kc.project(ctx, x, n_rows, kv, score);
    p.key_kv = kv;
    p.key_score = score;
  }
  p.iq_width = indexer_->query_width();
  p.iw_width = indexer_->n_heads();
  float* iq = scratch_of(scratch.iq, n_rows * p.iq_width);
  float* iw = scratch_of(scratch.iw, n_rows * p.iw_width);
  indexer_->queries(ctx, num, x, qr, n_rows, pos, inv_freq_, iq, iw);
  p.iq = iq;
  p.iw = iw;
  return p;
}

void V4Attention::attend(const ForwardContext& ctx, const V4Numerics& num, const Projections& p,
                         const float* q, const float* kv, int64_t n, const int32_t* pos,
                         const V4SequenceRows& rows, float* o, V4Scratch& scratch) const {
  const int64_t H = n_heads_, D = head_dim_;
  V4LayerState& st = *rows.state;
  const V4LayerPages& pages = rows.pages;
  // The entries this chunk completes go to the pages first; attention and the indexer then read
  // every entry where it lies (comp_idx below holds pool rows, V4EntryPages::row_of), so a step
  // copies no O(context) data.
  if (compressor_ && !rows.compressor_fed) compress(ctx, num, p.comp_kv, p.comp_score, n, pos, rows, scratch);
  const int64_t n_entries = rows.source != nullptr ? rows.source->n_entries : st.n_entries;
  std::vector<std::vector<int32_t>> selected;
  if (ratio_ > 0) selection(ctx, num, p, n, pos, rows, n_entries, selected);

  // Window keys in canonical order: the ring's positions ascending, then this chunk's tokens.
  // win_kv: [n_ring + n, D]
  std::vector<int64_t> ring_order;
  for (int64_t s = 0; s < window_; ++s)
    if (st.ring_pos[s] >= 0) ring_order.push_back(s);
  std::sort(ring_order.begin(), ring_order.end(),
            [&](int64_t a, int64_t b) { return st.ring_pos[a] < st.ring_pos[b]; });
  const int64_t n_ring = static_cast<int64_t>(ring_order.size());
  float* win_kv = scratch_of(scratch.win_kv, (n_ring + n) * D);
  std::vector<int64_t> win_pos(static_cast<size_t>(n_ring + n));
  for (int64_t i = 0; i < n_ring; ++i) {
    std::copy_n(st.ring_kv.data() + ring_order[i] * D, D, win_kv + i * D);
    win_pos[i] = st.ring_pos[ring_order[i]];
  }
  std::copy_n(kv, n * D, win_kv + n_ring * D);
  for (int64_t t = 0; t < n; ++t) win_pos[n_ring + t] = pos[t];

  // A draft block's rows see the whole ring and the whole block (docs/dspark.md).
  const int64_t n_win_idx = rows.draft_block ? n_ring + n : window_;
  int64_t n_comp_idx = 0;
  for (const std::vector<int32_t>& sel : selected) n_comp_idx = std::max<int64_t>(n_comp_idx, sel.size());
  std::vector<int32_t> win_idx(static_cast<size_t>(n * n_win_idx), -1);
  std::vector<int32_t> comp_idx(static_cast<size_t>(n * std::max<int64_t>(n_comp_idx, 1)), -1);
  for (int64_t t = 0; t < n; ++t) {
    int64_t k = 0;
    for (int64_t i = 0; i < n_ring + n; ++i) {
      if (rows.draft_block || (win_pos[i] > pos[t] - window_ && win_pos[i] <= pos[t]))
        win_idx[t * n_win_idx + k++] = static_cast<int32_t>(i);
    }
    if (ratio_ > 0) {
      for (size_t j = 0; j < selected[t].size(); ++j)
        comp_idx[t * n_comp_idx + j] = static_cast<int32_t>(pages.comp.row_of(selected[t][j]));
    }
  }
  SparseAttentionArgs sa;
  sa.q = q;
  sa.n_q = n;
  sa.n_heads = static_cast<int32_t>(H);
  sa.d = static_cast<int32_t>(D);
  sa.window = SparseKvSet{win_kv, D, win_idx.data(), n_win_idx};
  if (n_comp_idx > 0) sa.compressed = SparseKvSet{pages.comp.view.blocks, D, comp_idx.data(), n_comp_idx};
  sa.sink = sink_.data();
  sa.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  sa.round_probs_bf16 = num.rounds(Bf16Point::attn_probs);
  sa.out = o;
  sparse_attention(ctx.isa, *ctx.pool, sa);

  if (rows.draft_block) return;      // a draft block's KV is not kept
  for (int64_t t = 0; t < n; ++t) {  // the chunk's KV enters the ring after every query has read it
    const int64_t slot = pos[t] % window_;
    if (st.journal) {  // a journaled chunk may be cut after this row (v4_chunk_undo.h)
      st.ring_undo.pos.push_back(pos[t]);
      st.ring_undo.old_pos.push_back(st.ring_pos[slot]);
      st.ring_undo.old_kv.insert(st.ring_undo.old_kv.end(), st.ring_kv.data() + slot * D,
                                 st.ring_kv.data() + (slot + 1) * D);
    }
    std::copy_n(kv + t * D, D, st.ring_kv.data() + slot * D);
    st.ring_pos[slot] = pos[t];
  }
}

void V4Attention::window_kv(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
                            const int32_t* pos, float* kva, float* kv) const {
  const int64_t D = head_dim_, rd = rope_dim_;
  linear(ctx, wkv_.w, x, n, hidden_, kva, D);
  v4_rmsnorm(ctx.isa, num, Bf16Point::kv_norm, kva, n, D, kv_norm_.data(), eps_, kv);
  rope_interleaved(ctx.isa, kv, n, D, 1, D, D - rd, pos, inv_freq_);
  v4_cache_quant_sim(ctx.isa, num, window_quant_, kv, n, D, rd);
}

void V4Attention::inject_context(const ForwardContext& ctx, const V4Numerics& num, const float* c, int64_t n,
                                 const int32_t* pos, V4LayerState& st, V4Scratch& scratch) const {
  const int64_t D = head_dim_;
  float* kv = scratch_of(scratch.kv, n * D);
  window_kv(ctx, num, c, n, pos, scratch_of(scratch.kva, n * D), kv);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = pos[t] % window_;
    std::copy_n(kv + t * D, D, st.ring_kv.data() + slot * D);
    st.ring_pos[slot] = pos[t];
  }
}

void V4Attention::forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n_rows,
                          const int32_t* pos, std::span<const V4SequenceRows> seqs, float* out,
                          V4Scratch& scratch) const {
  const int64_t n = n_rows;
  const int64_t H = n_heads_, D = head_dim_, rd = rope_dim_, hd = H * D;
  // qr: [n, q_lora] normed query latent; q: [n, H, D]
  float* qa = scratch_of(scratch.qa, n * q_lora_);
  float* qr = scratch_of(scratch.qr, n * q_lora_);
  float* q = scratch_of(scratch.q, n * hd);
  linear(ctx, wq_a_.w, x, n, hidden_, qa, q_lora_);
  v4_rmsnorm(ctx.isa, num, Bf16Point::q_norm, qa, n, q_lora_, q_norm_.data(), eps_, qr);
  linear(ctx, wq_b_.w, qr, n, q_lora_, q, hd);
  for (int64_t r = 0; r < (q_head_norm(num) ? n * H : 0); ++r) {  // per-head RMS norm, no weight, not rounded
    float* v = q + r * D;
    double ss = 0;
    for (int64_t c = 0; c < D; ++c) ss += static_cast<double>(v[c]) * v[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps_));
    for (int64_t c = 0; c < D; ++c) v[c] *= inv;
  }
  rope_interleaved(ctx.isa, q, n, hd, H, D, D - rd, pos, inv_freq_);
  // kv: [n, D] shared K=V latent of the chunk's tokens
  float* kv = scratch_of(scratch.kv, n * D);
  window_kv(ctx, num, x, n, pos, scratch_of(scratch.kva, n * D), kv);

  // o: [n_rows, H, D] the attention output of every row
  float* o = scratch_of(scratch.o, n * hd);
  const Projections p = project(ctx, num, x, qr, n, pos, seqs, scratch);
  for (const V4SequenceRows& s : seqs) {
    attend(ctx, num, p.from_row(s.first_row), q + s.first_row * hd, kv + s.first_row * D, s.n,
           pos + s.first_row, s, o + s.first_row * hd, scratch);
  }
  rope_interleaved(ctx.isa, o, n, hd, H, D, D - rd, pos, inv_freq_, /*inverse=*/true);

  // Grouped low-rank output: z[:, g] = wo_a[g] · o[:, g] ([n, G·o_lora]), out = wo_b · z.
  const int64_t gw = hd / o_groups_;
  float* z = scratch_of(scratch.z, n * o_groups_ * o_lora_);
  for (int64_t g = 0; g < o_groups_; ++g)
    linear(ctx, wo_a_groups_[g], o + g * gw, n, hd, z + g * o_lora_, o_groups_ * o_lora_);
  linear(ctx, wo_b_.w, z, n, o_groups_ * o_lora_, out, hidden_);
}

}  // namespace ds
