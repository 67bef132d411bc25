#include "model/v4_compressor.h"
#include "model/v4_norm.h"

#include <cmath>
#include <limits>

#include "kernels/hadamard.h"
#include "kernels/norm.h"
#include "kernels/quant_sim.h"
#include "kernels/rope.h"

namespace ds {

Result<V4Compressor> V4Compressor::load(const Checkpoint& ckpt, const std::string& prefix,
                                        const V4CompressorDims& dims) {
  V4Compressor c;
  c.dims_ = dims;
  const int64_t width = (dims.overlap ? 2 : 1) * dims.d_c;
  DS_ASSIGN_OR_RETURN(c.wkv_, load_linear_layer(ckpt, prefix + "wkv", width, dims.hidden, 128));
  if (dims.gated) {
    DS_ASSIGN_OR_RETURN(c.wgate_, load_linear_layer(ckpt, prefix + "wgate", width, dims.hidden, 128));
  }
  if (dims.has_ape) {
    DS_ASSIGN_OR_RETURN(c.ape_, load_f32_param(ckpt, prefix + "ape", Shape{dims.ratio, width}));
  } else {
    c.ape_.assign(static_cast<size_t>(dims.ratio * width), 0.0f);  // adds exactly nothing
  }
  DS_ASSIGN_OR_RETURN(c.norm_, load_f32(ckpt, prefix + "norm.weight", Shape{dims.d_c}));
  return c;
}

void v4_cache_quant_sim(Isa isa, const V4Numerics& num, CacheQuant quant, float* rows, int64_t n_rows,
                        int64_t width, int64_t rope_dim) {
  if (n_rows == 0) return;
  switch (quant) {
    case CacheQuant::none:
      return;
    case CacheQuant::fp8_64_pow2_nope:
      if (num.kv_fp8_sim) quant_sim_rows(isa, rows, n_rows, width - rope_dim, width, v4_kv_fp8_spec());
      return;
    case CacheQuant::fp8_32_pow2:
      if (num.kv_fp8_sim) quant_sim_rows(isa, rows, n_rows, width, width, v41_window_fp8_spec());
      return;
    case CacheQuant::fp4_32_pow2:
      quant_sim_rows(isa, rows, n_rows, width, width, v4_indexer_fp4_spec());
      return;
    case CacheQuant::fp4_16_e4m3:
      quant_sim_rows(isa, rows, n_rows, width, width, v41_compressed_fp4_spec());
      return;
  }
}

void V4Compressor::project(const ForwardContext& ctx, const float* x, int64_t n, float* kv,
                           float* score) const {
  linear(ctx, wkv_.w, x, n, dims_.hidden, kv, width());
  if (dims_.gated) linear(ctx, wgate_.w, x, n, dims_.hidden, score, width());
}

void V4Compressor::feed(const ForwardContext& ctx, const V4Numerics& num, const float* a, const float* z,
                        int64_t n, const int32_t* pos, const std::vector<float>& inv_freq,
                        V4CompressorState& st, int64_t n_present, std::vector<float>& new_entries,
                        std::vector<float>* pre_rope, std::vector<int32_t>* entry_pos_out) const {
  const int64_t width = st.width, d_c = dims_.d_c, ratio = dims_.ratio;
  // Ungated (V4.1 ratio 1): equal scores, so a group's softmax weights are 1 / ratio = 1 exactly.
  const bool gated = dims_.gated;
  const int64_t first_new = n_present;
  std::vector<int32_t> entry_pos;
  std::vector<float> pooled;  // [n_new, d_c] before the norm
  const int64_t n_terms = st.rows();
  std::vector<float> tkv(static_cast<size_t>(n_terms)), tsc(static_cast<size_t>(n_terms));
  for (int64_t t = 0; t < n; ++t) {
    const int64_t phase = pos[t] % ratio;
    const int64_t row = (st.overlap ? ratio : 0) + phase;
    for (int64_t c = 0; c < width; ++c) {
      st.kv[row * width + c] = a[t * width + c];
      st.score[row * width + c] = (gated ? z[t * width + c] : 0.0f) + ape_[phase * width + c];
    }
    if (phase != ratio - 1) continue;
    if (st.journal) {  // a journaled chunk may be cut before this completion (v4_chunk_undo.h)
      st.undo.completion_pos.push_back(pos[t]);
      st.undo.kv_before.push_back(st.kv);
      st.undo.score_before.push_back(st.score);
    }
    // SWA bounded replay: a group completing below the cached prefix's end is already an entry in
    // the shared blocks; it only has to leave the state as the full run left it.
    const bool cached = (pos[t] + 1) / ratio - 1 < first_new;
    for (int64_t c = 0; c < d_c && !cached; ++c) {
      // Terms: overlap = previous group's channel c, then this group's channel d_c + c.
      for (int64_t r = 0; r < n_terms; ++r) {
        const int64_t ch = st.overlap && r >= ratio ? d_c + c : c;
        tkv[r] = st.kv[r * width + ch];
        tsc[r] = st.score[r * width + ch];
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < n_terms; ++r) mx = std::max(mx, tsc[r]);
      float sum = 0;
      for (int64_t r = 0; r < n_terms; ++r) sum += (tsc[r] = std::exp(tsc[r] - mx));
      float acc = 0;
      for (int64_t r = 0; r < n_terms; ++r) acc += tsc[r] / sum * tkv[r];
      pooled.push_back(acc);
    }
    if (!cached) entry_pos.push_back(static_cast<int32_t>(pos[t] + 1 - ratio));
    const int64_t cur = st.overlap ? ratio : 0;
    if (st.overlap) {
      std::copy(st.kv.begin() + ratio * width, st.kv.end(), st.kv.begin());
      std::copy(st.score.begin() + ratio * width, st.score.end(), st.score.begin());
    }
    std::fill(st.kv.begin() + cur * width, st.kv.end(), 0.0f);
    std::fill(st.score.begin() + cur * width, st.score.end(), -std::numeric_limits<float>::infinity());
  }
  const int64_t n_new = static_cast<int64_t>(entry_pos.size());
  new_entries.resize(static_cast<size_t>(n_new * d_c));
  if (entry_pos_out != nullptr) *entry_pos_out = entry_pos;
  if (pre_rope != nullptr) pre_rope->clear();
  if (n_new == 0) return;
  float* out = new_entries.data();  // out: [n_new, d_c]
  v4_rmsnorm(ctx.isa, num, Bf16Point::comp_norm, pooled.data(), n_new, d_c, norm_.data(), dims_.eps, out);
  if (pre_rope != nullptr) pre_rope->assign(out, out + n_new * d_c);
  rope_interleaved(ctx.isa, out, n_new, d_c, 1, d_c, d_c - dims_.rope_dim, entry_pos.data(), inv_freq);
  if (dims_.index_keys) hadamard_rows(ctx.isa, out, n_new, d_c, d_c, hadamard_default_scale(d_c));
  { v4_cache_quant_sim(ctx.isa, num, dims_.quant, out, n_new, d_c, dims_.rope_dim); }
}

}  // namespace ds
