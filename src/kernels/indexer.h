// V4 / V4.1 lightning-indexer scoring and top-k (model-spec §4.5, §5.5): for each query and
// each visible compressed entry t,
//   I_t = Σ_h w_h · ReLU(q_h · k_t)            (h = 0 .. n_heads − 1, in order)
// then the top min(top_k, n_visible) entries by I (descending; ties to the lower index; NaN
// ranks last, as kernels/topk.h). q is the indexer query after RoPE, Hadamard and the FP4
// simulation; w already carries 128^-1/2 · n_heads^-1/2; k are the indexer's compressed keys.
//
// Arithmetic per (query, entry): d_h = q_h · k_t (reference: sequential f32 sum; x86: the
// path's fixed lane split and reduction tree, as matmul), r_h = max(d_h, 0), I = Σ_h w_h · r_h
// (summed in head order; the x86 translation units are built with -mfma and GCC may fuse
// w_h · r_h into the running sum there, the reference's cannot). With round_bf16 (the official bf16 einsum:
// `einsum(q, k)` rounded to bf16, `* weights` in bf16, `.sum` over heads rounded once):
// r_h = bf16(max(d_h, 0)), each product w_h · r_h rounded to bf16, the f32 head sum rounded to
// bf16. That creates exact ties, which go to the lower entry. Each query is independent of the others in the
// call (batch invariant); paths differ by the dot products' summation order.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

struct IndexerArgs {
  const float* q = nullptr;        // [n_q, n_heads, head_dim]
  const float* weights = nullptr;  // [n_q, n_heads]
  int64_t n_q = 0;
  int32_t n_heads = 0;
  int32_t head_dim = 128;
  const float* keys = nullptr;  // [n_keys, head_dim], row stride ldk (or the paged pool below)
  int64_t n_keys = 0;
  int64_t ldk = 0;
  // [n_q]: entries [0, n_visible[i]) are visible to query i (clamped to [0, n_keys]); V4:
  // n_visible = (p + 1) / ratio for a query at position p.
  const int64_t* n_visible = nullptr;
  int64_t top_k = 512;
  float* scores = nullptr;     // optional [n_q, n_keys]: I for visible entries, −inf after them
  int32_t* top_idx = nullptr;  // optional [n_q, top_k]: selected entries, −1 in unused slots
  bool round_bf16 = false;     // the official kernel's bf16 rounding points (see above)
  // Optional paging (the keys left where a paged cache keeps them, not copied first): entry t is
  // row t mod keys_per_block of block key_block_table[t / keys_per_block], and block b's rows
  // start at keys + b · keys_per_block · ldk. nullptr: entry t is row t of keys. Each entry's
  // score is the same arithmetic either way (only the row address differs).
  const int32_t* key_block_table = nullptr;
  int64_t keys_per_block = 0;
};

void indexer_topk(Isa isa, ThreadPool& pool, const IndexerArgs& a);

}  // namespace ds
