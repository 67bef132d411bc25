// The x86 paths of the V4 compressor, indexer scoring and sparse attention, written once over a
// vector-traits type and instantiated by x86/avx512/v4_attention_avx512.cpp (16 lanes) and
// x86/avx2/v4_attention_avx2.cpp (8 lanes). Include only from those files.
//
// Each function computes one work unit with the operation order its kernel header documents:
//   compressor: channels are the vector lanes, so each lane runs the reference's scalar sequence
//     (max, exp, sum, divide, multiply-add in term order; no FMA) with the vector exp;
//   indexer / sparse attention: dot products use one accumulator per (row, head), chunks of
//     kLanes channels in order with FMA, then the traits' fixed reduction tree; everything after
//     the dot products follows the reference's order (scalar sums in key / head order).
// Nothing depends on which other units run in the same call: batch invariance by construction.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/sparse_attention.h"
#include "tensor/dtype.h"

namespace ds::x86_v4 {

// q · k over n channels: lane-split FMA chunks in order (last one masked), then reduce_add.
template <class Vec>
inline float dot(const float* q, const float* k, int64_t n) {
  using V = typename Vec::V;
  V acc = Vec::zero();
  int64_t c = 0;
  for (; c + Vec::kLanes <= n; c += Vec::kLanes) acc = Vec::fma(Vec::load(q + c), Vec::load(k + c), acc);
  if (c < n) {
    const auto m = Vec::mask(n - c);
    acc = Vec::fma(Vec::load_masked(q + c, m), Vec::load_masked(k + c, m), acc);
  }
  return Vec::reduce_add(acc);
}

template <class Vec>
void compressor_entry(const CompressorArgs& a, int64_t entry) {
  using V = typename Vec::V;
  const int64_t r = a.ratio;
  const int64_t base = (a.overlap && a.first_has_prev) ? r : 0;
  const int64_t cur0 = base + entry * r;
  const bool has_prev = a.overlap && (entry > 0 || a.first_has_prev);
  const int64_t prev0 = cur0 - r;
  const int64_t half = a.overlap ? a.d_c : 0;
  float* out = a.out + entry * a.ldo;  // out: [d_c]
  V e[2 * kCompressorMaxRatio];
  for (int64_t c = 0; c < a.d_c; c += Vec::kLanes) {
    const auto m = Vec::mask(a.d_c - c);
    // Term t: (row, channel offset); previous group first, as the reference.
    const int64_t n_terms = has_prev ? 2 * r : r;
    auto row_of = [&](int64_t t) { return has_prev ? (t < r ? prev0 + t : cur0 + t - r) : cur0 + t; };
    auto off_of = [&](int64_t t) { return (has_prev && t < r) ? c : half + c; };
    V mx = Vec::set1(-std::numeric_limits<float>::infinity());
    for (int64_t t = 0; t < n_terms; ++t) {
      e[t] = Vec::load_masked(a.score + row_of(t) * a.ld + off_of(t), m);
      mx = Vec::max_nan(e[t], mx);
    }
    V sum = Vec::zero();
    for (int64_t t = 0; t < n_terms; ++t) {
      e[t] = Vec::exp(Vec::sub(e[t], mx));
      sum = Vec::add(sum, e[t]);
    }
    V acc = Vec::zero();
    for (int64_t t = 0; t < n_terms; ++t) {
      const V p = Vec::div(e[t], sum);
      acc = Vec::add(acc, Vec::mul(p, Vec::load_masked(a.kv + row_of(t) * a.ld + off_of(t), m)));
    }
    Vec::store_masked(out + c, m, acc);
  }
}

// NH accumulators, one per q row, over the same k row: each is exactly dot<Vec>(q_h, k, n).
template <class Vec, int NH>
inline void dot_heads(const float* const* q, const float* k, int64_t n, float* out) {
  using V = typename Vec::V;
  V acc[NH];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) acc[h] = Vec::zero();
  int64_t c = 0;
  for (; c + Vec::kLanes <= n; c += Vec::kLanes) {
    const V kv = Vec::load(k + c);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) acc[h] = Vec::fma(Vec::load(q[h] + c), kv, acc[h]);
  }
  if (c < n) {
    const auto m = Vec::mask(n - c);
    const V kv = Vec::load_masked(k + c, m);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) acc[h] = Vec::fma(Vec::load_masked(q[h] + c, m), kv, acc[h]);
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) out[h] = Vec::reduce_add(acc[h]);
}

// w_h · ReLU(d_h), bf16-rounded as indexer.h documents when kRound. A compile-time switch: a
// run-time test here made GCC branch on the ReLU too (measured 4.5x slower).
template <bool kRound>
inline float head_term(float w, float d) {
  const float relu = d > 0.0f ? d : 0.0f;
  if constexpr (kRound) return round_to_bf16(w * round_to_bf16(relu));
  return w * relu;
}

// scores_row[t] for t in [t_begin, t_end): per key, the heads' dot products (4 heads share each
// key chunk load), ReLU, then the weighted sum in head order.
template <class Vec, bool kRound>
void indexer_scores_range_as(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                             float* scores_row) {
  constexpr int kHeads = 4;
  const float* q = a.q + i * a.n_heads * a.head_dim;  // q: [n_heads, head_dim]
  const float* w = a.weights + i * a.n_heads;         // w: [n_heads]
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* k = a.keys + t * a.ldk;
    float score = 0.0f;
    int32_t h = 0;
    for (; h + kHeads <= a.n_heads; h += kHeads) {
      const float* qh[kHeads];
      for (int u = 0; u < kHeads; ++u) qh[u] = q + (h + u) * a.head_dim;
      float d[kHeads];
      dot_heads<Vec, kHeads>(qh, k, a.head_dim, d);
      for (int u = 0; u < kHeads; ++u) score += head_term<kRound>(w[h + u], d[u]);
    }
    for (; h < a.n_heads; ++h) score += head_term<kRound>(w[h], dot<Vec>(q + h * a.head_dim, k, a.head_dim));
    scores_row[t] = kRound ? round_to_bf16(score) : score;
  }
}

template <class Vec>
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                          float* scores_row) {
  if (a.round_bf16) return indexer_scores_range_as<Vec, true>(a, i, t_begin, t_end, scores_row);
  indexer_scores_range_as<Vec, false>(a, i, t_begin, t_end, scores_row);
}

// Calls fn(row pointer) for every real key of query i, window set first, in slot order.
template <class Fn>
inline void for_each_key(const SparseAttentionArgs& a, int64_t i, Fn&& fn) {
  for (const SparseKvSet* s : {&a.window, &a.compressed}) {
    for (int64_t j = 0; j < s->n_idx; ++j) {
      const int32_t row = s->idx[i * s->n_idx + j];
      if (row >= 0) fn(s->kv + row * s->ld);
    }
  }
}

// Heads [h0, h0 + NH) of query i; scratch: NH rows of n_slots floats. Each head's arithmetic is
// the single-head sequence (the heads only share key row loads).
template <class Vec, int NH>
void sparse_attention_tile(const SparseAttentionArgs& a, int64_t i, int32_t h0, float* scratch,
                           int64_t n_slots) {
  using V = typename Vec::V;
  constexpr int kAccVecs = Vec::kLanes == 16 ? 4 : 2;  // output vectors per head held in registers
  const float* q[NH];
  float* out[NH];
  float* sc[NH];
  for (int u = 0; u < NH; ++u) {
    q[u] = a.q + (i * a.n_heads + h0 + u) * a.d;  // q: [d]
    out[u] = a.out + (i * a.n_heads + h0 + u) * a.d;
    sc[u] = scratch + u * n_slots;
  }
  int64_t n_keys = 0;
  for_each_key(a, i, [&](const float* kv) {
    float d[NH];
    dot_heads<Vec, NH>(q, kv, a.d, d);
    for (int u = 0; u < NH; ++u) sc[u][n_keys] = a.scale * d[u];
    ++n_keys;
  });
  if (n_keys == 0) {
    for (int u = 0; u < NH; ++u)
      for (int32_t c = 0; c < a.d; ++c) out[u][c] = 0.0f;
    return;
  }
  float sum[NH];
  for (int u = 0; u < NH; ++u) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n_keys; ++j) mx = sc[u][j] > mx ? sc[u][j] : mx;
    // exp is elementwise: which lanes the scores share does not change a bit.
    const V vmx = Vec::set1(mx);
    for (int64_t j = 0; j < n_keys; j += Vec::kLanes) {
      const auto m = Vec::mask(n_keys - j);
      Vec::store_masked(sc[u] + j, m, Vec::exp(Vec::sub(Vec::load_masked(sc[u] + j, m), vmx)));
    }
    sum[u] = 0.0f;
    for (int64_t j = 0; j < n_keys; ++j) sum[u] += sc[u][j];
    if (a.sink != nullptr) sum[u] += std::exp(a.sink[h0 + u] - mx);
    if (a.round_probs_bf16) {
      for (int64_t j = 0; j < n_keys; ++j) sc[u][j] = round_to_bf16(sc[u][j]);
    }
  }
  for (int64_t c0 = 0; c0 < a.d; c0 += kAccVecs * Vec::kLanes) {
    V acc[NH][kAccVecs];
    for (int u = 0; u < NH; ++u)
      for (int v = 0; v < kAccVecs; ++v) acc[u][v] = Vec::zero();
    int64_t key = 0;
    for_each_key(a, i, [&](const float* kv) {
#pragma GCC unroll 4
      for (int v = 0; v < kAccVecs; ++v) {
        const int64_t c = c0 + v * Vec::kLanes;
        if (c >= a.d) break;
        const V x = Vec::load_masked(kv + c, Vec::mask(a.d - c));
#pragma GCC unroll 8
        for (int u = 0; u < NH; ++u) acc[u][v] = Vec::fma(Vec::set1(sc[u][key]), x, acc[u][v]);
      }
      ++key;
    });
    for (int u = 0; u < NH; ++u) {
      for (int v = 0; v < kAccVecs; ++v) {
        const int64_t c = c0 + v * Vec::kLanes;
        if (c < a.d)
          Vec::store_masked(out[u] + c, Vec::mask(a.d - c), Vec::div(acc[u][v], Vec::set1(sum[u])));
      }
    }
  }
}

// Heads [h_begin, h_end) of query i, four at a time. scratch: 4 · n_slots floats.
template <class Vec>
void sparse_attention_heads(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                            float* scratch) {
  const int64_t n_slots = a.window.n_idx + a.compressed.n_idx;
  int32_t h = h_begin;
  for (; h + 4 <= h_end; h += 4) sparse_attention_tile<Vec, 4>(a, i, h, scratch, n_slots);
  for (; h < h_end; ++h) sparse_attention_tile<Vec, 1>(a, i, h, scratch, n_slots);
}

}  // namespace ds::x86_v4
