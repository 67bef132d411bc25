// Roofline accounting for a DeepSeek-V3-family checkpoint: the bytes one decode step must read
// and the FLOPs one prefill token costs, from the config and the checkpoint's own tensor dtypes
// (so an FP8 checkpoint with BF16 head and F32 block scales is counted as stored).
// Pure functions over tensor descriptions: testable without weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "weights/model_config.h"

namespace ds::bench {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  int64_t nbytes = 0;
};

// Bytes read per decoded token (batch 1) and matmul parameters per token, by part. The MTP
// layer (layers.<num_hidden_layers>) is excluded: the bench decodes with the main model only.
struct ActiveWeights {
  // Decode bytes per token, in stored precision incl. scale tensors.
  double attention_bytes = 0;  // self_attn.* of every main layer (MLA projections, their norms)
  double dense_bytes = 0;      // dense-layer MLPs, shared experts, router gates
  double routed_bytes = 0;     // num_experts_per_tok / n_routed_experts of the routed experts
  double head_bytes = 0;       // lm_head (or the tied embedding)
  double other_bytes = 0;      // layer norms, the final norm, one embedding row
  double total_bytes() const {
    return attention_bytes + dense_bytes + routed_bytes + head_bytes + other_bytes;
  }

  // Multiply-add count per token of every matmul except the head (which prefill runs for the
  // last prompt token only): the elements of 2-D weights, routed experts scaled by k / E.
  double body_params = 0;
  double head_params = 0;
  int n_mtp_tensors_excluded = 0;
  int n_unclassified = 0;  // tensors that fit no rule (counted in other_bytes)
};

ActiveWeights count_active_weights(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg);

// Attention FLOPs per prompt token, averaged over a causal prompt of prompt_len tokens (position p
// attends p + 1 rows), absorbed MLA: scores over [kv_lora_rank + rope] and the weighted sum over
// kv_lora_rank, per head and layer. The absorbed projections are matmuls (in body_params).
double mla_attention_flops_per_token(const ModelConfig& cfg, int64_t prompt_len);

// Latent-cache bytes one decode step reads at context length n_ctx (f32 rows of
// kv_lora_rank + qk_rope_head_dim per main layer).
double latent_cache_bytes(const ModelConfig& cfg, int64_t n_ctx);

}  // namespace ds::bench
