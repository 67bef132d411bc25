#include "model/v4_indexer.h"

#include <algorithm>
#include <cmath>

#include "kernels/hadamard.h"
#include "kernels/indexer.h"
#include "kernels/quant_sim.h"
#include "kernels/rope.h"

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
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  DS_ASSIGN_OR_RETURN(
      ix.wq_b_, load_linear_layer(ckpt, prefix + "wq_b", ix.n_heads_ * ix.head_dim_, ix.q_lora_, block));
  DS_ASSIGN_OR_RETURN(ix.weights_proj_,
                      load_linear_layer(ckpt, prefix + "weights_proj", ix.n_heads_, ix.hidden_, block));
  ix.quant_ = spec.index_keys;
  V4CompressorDims cd{ratio,        spec.overlap,   ix.head_dim_,
                      ix.rope_dim_, ix.hidden_,     static_cast<float>(c.rms_norm_eps),
                      true,         spec.index_keys};
  DS_ASSIGN_OR_RETURN(ix.compressor_, V4Compressor::load(ckpt, prefix + "compressor.", cd));
  return ix;
}

void V4Indexer::select(const ForwardContext& ctx, const V4Numerics& num, const float* x, const float* qr,
                       int64_t n, const int32_t* pos, const std::vector<float>& inv_freq, V4LayerState& st,
                       const V4EntryPages& keys, std::vector<std::vector<int32_t>>& selected) const {
  std::vector<float> new_keys;  // [n_new, index_dim]
  compressor_.feed(ctx, num, x, n, pos, inv_freq, st.idx_comp, st.n_idx_keys, new_keys);
  const int64_t n_new = static_cast<int64_t>(new_keys.size()) / head_dim_;
  keys.write(st.n_idx_keys, n_new, new_keys.data());
  st.n_idx_keys += n_new;
  const int64_t hd = n_heads_ * head_dim_;
  // q: [n, Hi, Di] after RoPE, Hadamard and FP4; w: [n, Hi] = bf16(W_w·x) · Di^-½ · Hi^-½
  std::vector<float> q(static_cast<size_t>(n * hd)), w(static_cast<size_t>(n * n_heads_));
  linear(ctx, wq_b_.w, qr, n, q_lora_, q.data(), hd);
  rope_interleaved(ctx.isa, q.data(), n, hd, n_heads_, head_dim_, head_dim_ - rope_dim_, pos, inv_freq);
  hadamard_rows(ctx.isa, q.data(), n * n_heads_, head_dim_, head_dim_, hadamard_default_scale(head_dim_));
  v4_cache_quant_sim(ctx.isa, num, quant_, q.data(), n * n_heads_, head_dim_, rope_dim_);
  linear(ctx, weights_proj_.w, x, n, hidden_, w.data(), n_heads_);
  const float w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_) * n_heads_));
  for (float& v : w) v = num.round(Bf16Point::index_w, v) * w_scale;

  const int64_t n_keys = st.n_idx_keys;
  std::vector<int64_t> n_visible(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) n_visible[t] = std::min<int64_t>((pos[t] + 1) / ratio_, n_keys);
  std::vector<int32_t> top(static_cast<size_t>(n * top_k_), -1);
  if (n_keys > 0) {
    IndexerArgs a;
    a.q = q.data();
    a.weights = w.data();
    a.n_q = n;
    a.n_heads = static_cast<int32_t>(n_heads_);
    a.head_dim = static_cast<int32_t>(head_dim_);
    a.keys = keys.view.blocks;  // the pool; entry t at keys.row_of(t)
    a.n_keys = n_keys;
    a.ldk = keys.view.row_dim;
    a.key_block_table = keys.block_table;
    a.keys_per_block = keys.view.block_size;
    a.n_visible = n_visible.data();
    a.top_k = top_k_;
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

}  // namespace ds
