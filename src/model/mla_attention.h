// Multi-head latent attention (DeepSeek V2/V3): weights and the forward for a batch of token rows
// from several sequences, each reading and writing its own blocks of the paged latent cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/batch_layout.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/model_options.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct MlaDims {
  int64_t hidden = 0;
  int64_t n_heads = 0;
  int64_t q_lora_rank = 0;  // 0: plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head = 0;
  float eps = 1e-6f;
  float softmax_scale = 1.0f;  // (qk_nope + qk_rope)^-½ · mscale²

  int64_t qk_head() const { return qk_nope + qk_rope; }
  int64_t latent_row() const { return kv_lora_rank + qk_rope; }  // cache row width

  static MlaDims from_config(const ModelConfig& c);
};

// Reused between calls; sized by the largest batch seen (no allocation in steady decode).
struct MlaScratch {
  TensorF32 cq;                          // [n_rows, q_lora_rank]
  TensorF32 q;                           // [n_rows, n_heads, qk_nope + qk_rope]
  TensorF32 kv;                          // [n_rows, kv_lora_rank + qk_rope]
  TensorF32 q_lat;                       // [n_rows, n_heads, kv_lora_rank + qk_rope]  absorbed queries
  TensorF32 o_lat;                       // [n_rows, n_heads, kv_lora_rank]            attended latents
  TensorF32 o;                           // [n_rows, n_heads, v_head]
  std::vector<const float*> block_rows;  // absorbed: one chunk's blocks [ceil(n_ctx / block_size)]
  TensorF32 ctx_rows;           // plain: one chunk's cache rows gathered [n_ctx, kv_lora_rank + qk_rope]
  TensorF32 kv_up;              // plain: [n_ctx, n_heads, qk_nope + v_head]
  TensorF32 k;                  // plain: [n_ctx, n_heads, qk_nope + qk_rope]
  TensorF32 v;                  // plain: [n_ctx, n_heads, v_head]
  std::vector<int32_t> kv_pos;  // plain: [n_ctx]
};

class MlaAttention {
 public:
  // prefix = "model.layers.N.self_attn". `block` = the FP8 scale tile (quantization config).
  static Result<MlaAttention> load(const Checkpoint& ckpt, const std::string& prefix, const MlaDims& dims,
                                   int block);

  const MlaDims& dims() const { return dims_; }

  // x: [n_rows, hidden] (already input-normed); out: [n_rows, hidden]. Writes each row's latent
  // to its position in its chunk's blocks of batch.cache, then attends causally over the chunk's
  // positions [0, pos_begin + n_rows). inv_freq: RoPE frequencies.
  void forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
               const std::vector<float>& inv_freq, const float* x, MlaScratch& s, float* out) const;

 private:
  void attend_absorbed(const ForwardContext& ctx, const AttentionBatch& batch, MlaScratch& s) const;
  void attend_plain(const ForwardContext& ctx, const AttentionBatch& batch, MlaScratch& s) const;
  // One head's slice of the absorbed form, for all T rows (one task of a parallel_for).
  void absorb_query_head(const ForwardContext& ctx, MlaScratch& s, int64_t T, int64_t h) const;
  void expand_output_head(const ForwardContext& ctx, MlaScratch& s, int64_t T, int64_t h) const;

  MlaDims dims_;
  Linear q_a_, q_b_, q_;  // q_a_/q_b_ when q_lora_rank > 0, else q_
  std::vector<float> q_a_norm_;
  Linear kv_a_;
  std::vector<float> kv_a_norm_;
  Linear o_;
  // kv_b_proj dequantised to f32 at load (n_heads·(qk_nope+v_head) × kv_lora_rank: 32 MB per V3
  // layer at f32): the absorbed form needs W_uk transposed per head, and both forms then use the
  // same f32 values. Rows per head h: [W_uk,h (qk_nope rows); W_uv,h (v_head rows)].
  std::vector<float> kv_b_f32_;
  WeightMatrix kv_b_;                 // over kv_b_f32_: [n_heads·(qk_nope+v_head), kv_lora_rank]
  std::vector<float> w_uk_t_f32_;     // per head W_uk,hᵀ: [n_heads][kv_lora_rank, qk_nope]
  std::vector<WeightMatrix> w_uk_t_;  // per head, over w_uk_t_f32_
  std::vector<WeightMatrix> w_uv_;    // per head [v_head, kv_lora_rank], over kv_b_f32_
};

}  // namespace ds
