// V4 / V4.1 sparse attention core with a learned sink (model-spec §4.6): per query and head, the
// keys are the rows a query lists in two index sets (the window ring and the selected compressed
// entries; −1 marks an empty slot), the value of a key is the key itself (one 512-d K=V latent
// shared by all heads), and the head's sink logit σ_h enters only the denominator:
//   s_j = scale · (q_h · kv_j),  m = max_j s_j,  e_j = exp(s_j − m),
//   o_h = Σ_j r(e_j) · kv_j / (Σ_j e_j + exp(σ_h − m))
// where r = round-to-bf16 when round_probs_bf16 (the official kernel casts the exponentials to
// bf16 for the probability × V product but keeps the f32 sum), else the identity. No key at all
// gives o = 0. The inverse RoPE of o is the caller's (kernels/rope.h).
//
// Arithmetic per (query, head), in this order: the scores in key order (window set, then the
// compressed set; dot products as in matmul: sequential in the reference, the path's fixed lane
// split on x86), their max, e_j and their sum in key order, + exp(σ − m), then
// o = (Σ_j r(e_j) · kv_j in key order) / sum. Each (query, head) is independent of the others
// (batch invariant); paths differ by summation order, exp (≤ 1 ulp) and FMA contraction.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

struct SparseKvSet {
  const float* kv = nullptr;  // [n_rows, d], row stride ld
  int64_t ld = 0;
  const int32_t* idx = nullptr;  // [n_q, n_idx]: rows of kv, −1 = empty slot
  int64_t n_idx = 0;             // slots per query (0: the set is unused)
};

struct SparseAttentionArgs {
  const float* q = nullptr;  // [n_q, n_heads, d]
  int64_t n_q = 0;
  int32_t n_heads = 0;
  int32_t d = 512;
  SparseKvSet window;           // e.g. the 128-slot window ring
  SparseKvSet compressed;       // e.g. the CSA top-k or every visible HCA entry
  const float* sink = nullptr;  // [n_heads] (nullptr: no sink)
  float scale = 1.0f;           // V4: 512^-1/2
  bool round_probs_bf16 = true;
  float* out = nullptr;  // [n_q, n_heads, d]
};

void sparse_attention(Isa isa, ThreadPool& pool, const SparseAttentionArgs& a);

}  // namespace ds
