// MLA attention kernels (DeepSeek V2/V3/V3.2). Causal by absolute position: a query at position p
// sees cache rows 0..p. All math f32; each (query, head) is computed independently (batch-invariant).
//
// Softmax is two-pass in a fixed order: the scores of every visible row, their max, exp(s − max)
// summed in row order, then Σ_j e_j·v_j in row order times 1/Σ. For a given Isa each (query, head)
// result is bit-identical whatever other queries share the call, their order and the pool size
// (tests check this bitwise). Paths differ from each other by f32 rounding and the vector exp
// (≤ 1 ulp measured; see kernels/x86/avx512/exp_avx512.h).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

// Absorbed form over the latent cache (decode, and prefill when the model chooses it).
//   q:      [n_q, n_heads, latent_dim + rope_dim]   (q_nope already multiplied by W_uk, then q_pe)
//   cache:  [n_ctx, latent_dim + rope_dim]          (normalised c_kv, then RoPE'd k_pe) — shared by heads
//   out:    [n_q, n_heads, latent_dim]              = Σ_j softmax_j(scale · q·cache_j) · cache_j[:latent_dim]
// Query i attends cache rows 0 .. q_pos[i] (q_pos[i] < n_ctx).
//
// The cache is paged: row j lives at block_rows[j / block_size] + (j % block_size)·(latent_dim +
// rope_dim), block_rows holding row 0 of each of the sequence's ceil(n_ctx / block_size) blocks in
// position order. Rows are visited in position order whatever the blocks, so the result is
// bit-identical for every block size and block placement (tests check this bitwise). Rows of a
// block past n_ctx are never read. A contiguous cache is the one-block case: leave block_rows null
// and set `cache` ([n_ctx, latent_dim + rope_dim]).
struct MlaAbsorbedArgs {
  const float* q = nullptr;
  int64_t n_q = 0;
  const int32_t* q_pos = nullptr;
  const float* const* block_rows = nullptr;  // [ceil(n_ctx / block_size)]
  int64_t block_size = 0;                    // rows per block, > 0 when block_rows is set
  const float* cache = nullptr;              // contiguous form, used only when block_rows is null
  int64_t n_ctx = 0;
  int n_heads = 0;
  int latent_dim = 512;
  int rope_dim = 64;
  float scale = 1.0f;
  float* out = nullptr;
};
// Each cache row is streamed once per task for all of the task's heads; a task takes all heads of
// a query unless the pool has more threads than queries (decode), then the heads are split.
void mla_attention_absorbed(Isa isa, ThreadPool& pool, const MlaAbsorbedArgs& a);

// Plain (non-absorbed) multi-head form for prefill:
//   q: [n_q, n_heads, qk_dim], k: [n_kv, n_heads, qk_dim], v: [n_kv, n_heads, v_dim]
//   out: [n_q, n_heads, v_dim]. Query i attends kv rows j with kv_pos[j] <= q_pos[i].
// The x86 paths let the queries of a tile share K/V row loads; a V row a query cannot see then
// enters its sum with weight exactly 0, so V rows must be finite (they are in a prefill).
struct MhaArgs {
  const float* q = nullptr;
  int64_t n_q = 0;
  const int32_t* q_pos = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t n_kv = 0;
  const int32_t* kv_pos = nullptr;
  int n_heads = 0;
  int qk_dim = 0;
  int v_dim = 0;
  float scale = 1.0f;
  float* out = nullptr;
};
void mha_attention(Isa isa, ThreadPool& pool, const MhaArgs& a);

}  // namespace ds
