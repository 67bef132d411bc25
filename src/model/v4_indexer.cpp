#include "model/v4_indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/hadamard.h"
#include "kernels/indexer.h"
#include "kernels/quant_sim.h"
#include "kernels/rope.h"
#include "kernels/topk.h"
#include "model/v4_norm.h"

namespace ds {

Result<V4Indexer> V4Indexer::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                  const LayerSpec& spec) {
  const int32_t ratio = spec.compress_ratio;
  V4Indexer ix;
  ix.n_heads_ = c.index_n_heads;
  ix.head_dim_ = c.index_head_dim;
  ix.rope_dim_ = c.qk_rope_head_dim;
  ix.hidden_ = c.hidden_size;
  ix.q_lora_ = c.q_lora_rank;
  ix.top_k_ = c.index_topk;
  ix.ratio_ = ratio;
  ix.hadamard_ = spec.index_compressor;  // V4's indexer; V4.1 has no Hadamard (§5.5)
  ix.candidate_source_ = spec.candidate_source;
  ix.candidate_pool_ = spec.candidate_pool;
  ix.candidate_block_ = c.candidate_block_size;
  ix.candidate_blocks_ = c.candidate_topk_blocks;
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  DS_ASSIGN_OR_RETURN(
      ix.wq_b_, load_linear_layer(ckpt, prefix + "wq_b", ix.n_heads_ * ix.head_dim_, ix.q_lora_, block));
  DS_ASSIGN_OR_RETURN(ix.weights_proj_,
                      load_linear_layer(ckpt, prefix + "weights_proj", ix.n_heads_, ix.hidden_, block));
  ix.quant_ = spec.index_keys;
  if (spec.index_compressor) {
    V4CompressorDims cd{ratio,      spec.overlap,   ix.head_dim_, ix.rope_dim_,
                        ix.hidden_, c.rms_norm_eps, true,         spec.index_keys};
    DS_ASSIGN_OR_RETURN(ix.compressor_, V4Compressor::load(ckpt, prefix + "compressor.", cd));
  }
  return ix;
}

void V4Indexer::queries(const ForwardContext& ctx, const V4Numerics& num, const float* x, const float* qr,
                        int64_t n, const int32_t* pos, const std::vector<float>& inv_freq, float* q,
                        float* w) const {
  const int64_t hd = n_heads_ * head_dim_;
  linear(ctx, wq_b_.w, qr, n, q_lora_, q, hd);
  rope_interleaved(ctx.isa, q, n, hd, n_heads_, head_dim_, head_dim_ - rope_dim_, pos, inv_freq);
  if (hadamard_)
    hadamard_rows(ctx.isa, q, n * n_heads_, head_dim_, head_dim_, hadamard_default_scale(head_dim_));
  v4_cache_quant_sim(ctx.isa, num, quant_, q, n * n_heads_, head_dim_, rope_dim_);
  linear(ctx, weights_proj_.w, x, n, hidden_, w, n_heads_);
  const float w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_) * n_heads_));
  for (int64_t i = 0; i < n * n_heads_; ++i) w[i] = num.round(Bf16Point::index_w, w[i]) * w_scale;
}

void V4Indexer::score(const ForwardContext& ctx, const float* q, const float* w, int64_t n,
                      const int64_t* n_visible, const V4EntryPages& keys, int64_t n_keys, float* scores,
                      std::vector<std::vector<int32_t>>& selected) const {
  std::vector<int32_t> top(static_cast<size_t>(n * top_k_), -1);
  if (n_keys > 0) {
    IndexerArgs a;
    a.q = q;
    a.weights = w;
    a.n_q = n;
    a.n_heads = static_cast<int32_t>(n_heads_);
    a.head_dim = static_cast<int32_t>(head_dim_);
    a.keys = keys.view.blocks;  // the pool; entry t at keys.row_of(t)
    a.n_keys = n_keys;
    a.ldk = keys.view.row_dim;
    a.key_block_table = keys.block_table;
    a.keys_per_block = keys.view.block_size;
    a.n_visible = n_visible;
    a.top_k = top_k_;
    a.scores = scores;
    a.top_idx = top.data();
    indexer_topk(ctx.isa, *ctx.pool, a);
  }
  selected.assign(static_cast<size_t>(n), {});
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t>& sel = selected[t];
    if (n_visible[t] <= top_k_) {
      for (int32_t j = 0; j < n_visible[t]; ++j) sel.push_back(j);
      continue;
    }
    for (int64_t k = 0; k < top_k_; ++k) {
      if (top[t * top_k_ + k] >= 0) sel.push_back(top[t * top_k_ + k]);
    }
    std::sort(sel.begin(), sel.end());  // canonical key order: ascending entries (as the reference)
  }
}

void V4Indexer::select(const ForwardContext& ctx, const V4Numerics& num, const float* key_kv,
                       const float* key_score, const float* q, const float* w, int64_t n, const int32_t* pos,
                       const std::vector<float>& inv_freq, V4LayerState& st, const V4EntryPages& keys,
                       std::vector<std::vector<int32_t>>& selected) const {
  std::vector<float> new_keys;  // [n_new, index_dim]
  compressor_.feed(ctx, num, key_kv, key_score, n, pos, inv_freq, st.idx_comp, st.n_idx_keys, new_keys);
  const int64_t n_new = static_cast<int64_t>(new_keys.size()) / head_dim_;
  keys.write(st.n_idx_keys, n_new, new_keys.data());
  st.n_idx_keys += n_new;
  const int64_t n_keys = st.n_idx_keys;
  std::vector<int64_t> n_visible(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) n_visible[t] = std::min<int64_t>((pos[t] + 1) / ratio_, n_keys);
  score(ctx, q, w, n, n_visible.data(), keys, n_keys, nullptr, selected);
}

void V4Indexer::select_v41(const ForwardContext& ctx, const float* q, const float* w, int64_t n,
                           const int32_t* pos, const V4EntryPages& keys, int64_t n_keys,
                           V41StepSelection& shared, std::vector<std::vector<int32_t>>& selected) const {
  std::vector<int64_t> n_visible(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) n_visible[t] = std::min<int64_t>((pos[t] + 1) / ratio_, n_keys);
  const bool need_rows = candidate_source_ || candidate_pool_;
  // rows: [n, n_keys] the masked score rows (−inf past the visible entries)
  std::vector<float> rows(need_rows ? static_cast<size_t>(n * n_keys) : 0);
  score(ctx, q, w, n, n_visible.data(), keys, n_keys, need_rows ? rows.data() : nullptr, selected);
  if (!need_rows) return;
  const int64_t B = candidate_block_;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (candidate_source_) shared.pool_blocks.assign(static_cast<size_t>(n), {});
  for (int64_t t = 0; t < n; ++t) {
    const float* row = rows.data() + t * n_keys;
    const int64_t vis = n_visible[t];
    const int64_t n_blocks = (vis + B - 1) / B;
    if (candidate_source_) {
      // §5.6: blocks of B entries scored by their maximum, the newest visible block forced in,
      // the top candidate_topk_blocks kept (ties to the lower block).
      std::vector<float> block_score(static_cast<size_t>(n_blocks), -kInf);
      for (int64_t j = 0; j < vis; ++j) block_score[j / B] = std::max(block_score[j / B], row[j]);
      if (n_blocks > 0) block_score[n_blocks - 1] = kInf;
      const int64_t keep = std::min<int64_t>(n_blocks, candidate_blocks_);
      std::vector<int32_t>& kept = shared.pool_blocks[t];
      kept.resize(static_cast<size_t>(keep));
      if (keep > 0) topk(ctx.isa, block_score.data(), n_blocks, keep, kept.data(), nullptr);
      std::sort(kept.begin(), kept.end());
      continue;
    }
    // A pool layer: entries outside the candidate source's pool score −inf; it takes the top
    // min(index_topk, pool ∩ visible) so that it never selects a masked entry.
    std::vector<float> masked(static_cast<size_t>(vis), -kInf);
    int64_t in_pool = 0;
    for (int32_t b : shared.pool_blocks[t]) {
      for (int64_t j = int64_t{b} * B; j < std::min(vis, (int64_t{b} + 1) * B); ++j) {
        masked[j] = row[j];
        ++in_pool;
      }
    }
    const int64_t k = std::min<int64_t>(top_k_, in_pool);
    std::vector<int32_t>& sel = selected[t];
    sel.resize(static_cast<size_t>(k));
    if (k > 0) topk(ctx.isa, masked.data(), vis, k, sel.data(), nullptr);
    std::sort(sel.begin(), sel.end());
  }
}

Result<V41IndexKeys> V41IndexKeys::load(const Checkpoint& ckpt, const std::string& prefix,
                                        const ModelConfig& c, const LayerSpec& spec) {
  V41IndexKeys k;
  k.head_dim_ = c.head_dim;
  k.index_dim_ = c.index_head_dim;
  k.rope_dim_ = c.qk_rope_head_dim;
  k.eps_ = c.rms_norm_eps;
  k.quant_ = spec.index_keys;
  DS_ASSIGN_OR_RETURN(k.wk_, load_linear_layer(ckpt, prefix + "wk", k.index_dim_, k.head_dim_, 128));
  DS_ASSIGN_OR_RETURN(k.k_norm_, load_f32(ckpt, prefix + "k_norm.weight", Shape{k.index_dim_}));
  return k;
}

void V41IndexKeys::make(const ForwardContext& ctx, const V4Numerics& num, const float* latent, int64_t n,
                        const int32_t* entry_pos, const std::vector<float>& inv_freq,
                        std::vector<float>& keys) const {
  keys.resize(static_cast<size_t>(n * index_dim_));
  if (n == 0) return;
  std::vector<float> projected(static_cast<size_t>(n * index_dim_));  // [n, index_dim]
  linear(ctx, wk_.w, latent, n, head_dim_, projected.data(), index_dim_);
  v4_rmsnorm(ctx.isa, num, Bf16Point::comp_norm, projected.data(), n, index_dim_, k_norm_.data(), eps_,
             keys.data());
  rope_interleaved(ctx.isa, keys.data(), n, index_dim_, 1, index_dim_, index_dim_ - rope_dim_, entry_pos,
                   inv_freq);
  v4_cache_quant_sim(ctx.isa, num, quant_, keys.data(), n, index_dim_, rope_dim_);
}

}  // namespace ds
