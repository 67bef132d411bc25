// Roofline accounting for a DeepSeek-V4 checkpoint (V4 tensor names: `layers.N.attn.*`,
// `layers.N.ffn.*`, `head.weight`, `mtp.K.*`). Same ActiveWeights as V3 (active_weights.h):
//   attention: every `attn.*` tensor (projections, compressors, indexer; all run for every token)
//   dense:     the shared expert and the router gate (`ffn.shared_experts.*`, `ffn.gate.*`; the hash
//              layers' tid2eid table is one row per token)
//   routed:    num_experts_per_tok / n_routed_experts of the routed experts; packed FP4 (I8
//              [out, in/2]) at 4.25 bits per weight: 4 bits of E2M1 + one 8-bit E8M0 scale per 32
//   head:      head.weight; other: norms, mHC (hc_*), one embedding row
// The draft layers (mtp.*) are excluded. docs/benchmarks.md "V4" writes the formula out.
#pragma once

#include <cstdint>
#include <vector>

#include "active_weights.h"

namespace ds::bench {

ActiveWeights count_active_weights_v4(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg);

// Attention FLOPs per prompt token of the main layers, averaged over a causal prompt of
// prompt_len tokens. At position p a layer with compress ratio r attends
//   keys(p) = min(window, p + 1)                           (sliding window)
//           + n_c(p)                   if r > 0 and r != 4 (HCA: every compressed entry)
//           + min(index_topk, n_c(p))  if r == 4           (CSA: the indexer's top-k)
// with n_c(p) = floor((p + 1) / r) complete groups; each key costs 2·head_dim (scores) +
// 2·head_dim (weighted sum) per head. CSA layers also score n_c(p) indexer keys:
// 2·index_n_heads·index_head_dim each. Projections are matmuls (in body_params).
double v4_attention_flops_per_token(const ModelConfig& cfg, int64_t prompt_len);

// Cache bytes one decode step reads at context n_ctx (f32 rows): per main layer the window's
// min(window, n_ctx) rows of head_dim, the attended compressed rows (all for HCA, index_topk for
// CSA) and, for CSA, all n_ctx / 4 indexer keys of index_head_dim.
double v4_cache_bytes(const ModelConfig& cfg, int64_t n_ctx);

}  // namespace ds::bench
