// The x86 attention kernels, written once over a vector-traits type and instantiated by
// x86/avx512/attention_avx512.cpp (16 lanes) and x86/avx2/attention_avx2.cpp (8 lanes).
// Include only from those files: the traits use ISA intrinsics.
//
// Per (query, head) the operation order is fixed and independent of how heads and rows are
// tiled, of the other queries in the call and of the pool size (batch invariance):
//   score_j = reduce_add(Σ_chunks fma(q_chunk, k_chunk)) · scale   (one accumulator per (head, row),
//             chunks in channel order, the traits' fixed lane-reduction tree)
//   max, then e_j = exp(score_j − max) with a lane-wise sum in row order, reduced by the same tree
//   out = (Σ_j e_j · v_j, one fma chain per output lane in row order) · (1 / sum)
// Tiling (how many heads share a cache row load, how many rows a tile takes, how the heads of a
// query are split into tasks) only decides which loads are shared, never the arithmetic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"

namespace ds::x86_attention {

constexpr int kTileHeads = 4;                          // heads sharing one load of a key row chunk
constexpr int kTileRows = 4;                           // key rows sharing one load of a query chunk
constexpr int kBlockRows = 64;                         // key/value rows swept by every head tile in turn
constexpr int kMaxTaskHeads = 128;                     // heads one task may take (bounds its stack arrays)
constexpr int kAccumVecs = 4;                          // output vectors per head held in registers
constexpr int64_t kMaxScoreFloats = int64_t{1} << 22;  // per-task score scratch cap (16 MiB)

// scores[h][r] = scale · q_h · k_r over d channels.
template <class Vec, int NH, int NR>
void dot_tile(const float* const* q_rows, const float* const* k_rows, int64_t d, float scale, float* s_out,
              int64_t s_stride) {
  using V = typename Vec::V;
  V acc[NH][NR];
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[h][r] = Vec::zero();
  int64_t c = 0;
  for (; c + Vec::kLanes <= d; c += Vec::kLanes) {
    V kv[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) kv[r] = Vec::load(k_rows[r] + c);
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const V qv = Vec::load(q_rows[h] + c);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[h][r] = Vec::fma(qv, kv[r], acc[h][r]);
    }
  }
  if (c < d) {
    const auto m = Vec::mask(d - c);
    V kv[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) kv[r] = Vec::load_masked(k_rows[r] + c, m);
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const V qv = Vec::load_masked(q_rows[h] + c, m);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[h][r] = Vec::fma(qv, kv[r], acc[h][r]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) s_out[h * s_stride + r] = Vec::reduce_add(acc[h][r]) * scale;
}

template <class Vec, int NH>
void dot_tile_rows(int nr, const float* const* q_rows, const float* const* k_rows, int64_t d, float scale,
                   float* s_out, int64_t s_stride) {
  switch (nr) {
    case 4:
      return dot_tile<Vec, NH, 4>(q_rows, k_rows, d, scale, s_out, s_stride);
    case 3:
      return dot_tile<Vec, NH, 3>(q_rows, k_rows, d, scale, s_out, s_stride);
    case 2:
      return dot_tile<Vec, NH, 2>(q_rows, k_rows, d, scale, s_out, s_stride);
    default:
      return dot_tile<Vec, NH, 1>(q_rows, k_rows, d, scale, s_out, s_stride);
  }
}

template <class Vec>
void dot_tile_any(int nh, int nr, const float* const* q_rows, const float* const* k_rows, int64_t d,
                  float scale, float* s_out, int64_t s_stride) {
  switch (nh) {
    case 4:
      return dot_tile_rows<Vec, 4>(nr, q_rows, k_rows, d, scale, s_out, s_stride);
    case 3:
      return dot_tile_rows<Vec, 3>(nr, q_rows, k_rows, d, scale, s_out, s_stride);
    case 2:
      return dot_tile_rows<Vec, 2>(nr, q_rows, k_rows, d, scale, s_out, s_stride);
    default:
      return dot_tile_rows<Vec, 1>(nr, q_rows, k_rows, d, scale, s_out, s_stride);
  }
}

// out_h[c0 .. c0 + NV·lanes) += Σ_{t < n_rows} w_h[t] · rows[t][c0 ..], in row order. The last
// vector is masked by `last` (all lanes when the range is whole).
template <class Vec, int NH, int NV>
void accum_tile(const float* const* w, const float* const* rows, int n_rows, int64_t c0,
                typename Vec::Mask last, float* const* out) {
  using V = typename Vec::V;
  V acc[NH][NV];
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[h][v] = v == NV - 1 ? Vec::load_masked(out[h] + c0 + v * Vec::kLanes, last)
                              : Vec::load(out[h] + c0 + v * Vec::kLanes);
  for (int t = 0; t < n_rows; ++t) {
    V xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      xv[v] = v == NV - 1 ? Vec::load_masked(rows[t] + c0 + v * Vec::kLanes, last)
                          : Vec::load(rows[t] + c0 + v * Vec::kLanes);
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const V wv = Vec::set1(w[h][t]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[h][v] = Vec::fma(wv, xv[v], acc[h][v]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v == NV - 1) {
        Vec::store_masked(out[h] + c0 + v * Vec::kLanes, last, acc[h][v]);
      } else {
        Vec::store(out[h] + c0 + v * Vec::kLanes, acc[h][v]);
      }
    }
}

template <class Vec, int NH>
void accum_tile_vecs(int nv, const float* const* w, const float* const* rows, int n_rows, int64_t c0,
                     typename Vec::Mask last, float* const* out) {
  switch (nv) {
    case 4:
      return accum_tile<Vec, NH, 4>(w, rows, n_rows, c0, last, out);
    case 3:
      return accum_tile<Vec, NH, 3>(w, rows, n_rows, c0, last, out);
    case 2:
      return accum_tile<Vec, NH, 2>(w, rows, n_rows, c0, last, out);
    default:
      return accum_tile<Vec, NH, 1>(w, rows, n_rows, c0, last, out);
  }
}

// Σ over heads [0, nh) and channels [0, width) of the rows block: out_h += Σ_t w_h[t]·rows[t].
template <class Vec>
void accum_block(int nh, const float* const* w, const float* const* rows, int n_rows, int64_t width,
                 float* const* out) {
  constexpr int64_t kSpan = int64_t{kAccumVecs} * Vec::kLanes;
  for (int hq = 0; hq < nh; hq += kTileHeads) {
    const int nhq = std::min(kTileHeads, nh - hq);
    for (int64_t c0 = 0; c0 < width; c0 += kSpan) {
      const int64_t span = std::min(kSpan, width - c0);
      const int nv = static_cast<int>((span + Vec::kLanes - 1) / Vec::kLanes);
      const auto last = Vec::mask(span - int64_t{nv - 1} * Vec::kLanes);
      switch (nhq) {
        case 4:
          accum_tile_vecs<Vec, 4>(nv, w + hq, rows, n_rows, c0, last, out + hq);
          break;
        case 3:
          accum_tile_vecs<Vec, 3>(nv, w + hq, rows, n_rows, c0, last, out + hq);
          break;
        case 2:
          accum_tile_vecs<Vec, 2>(nv, w + hq, rows, n_rows, c0, last, out + hq);
          break;
        default:
          accum_tile_vecs<Vec, 1>(nv, w + hq, rows, n_rows, c0, last, out + hq);
          break;
      }
    }
  }
}

// s[0 .. n) ← exp(s − max(s)); returns 1 / Σ (f32). n ≥ 1.
template <class Vec>
float exp_and_inverse_sum(float* s, int64_t n) {
  using V = typename Vec::V;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  V max_v = Vec::set1(neg_inf);
  for (int64_t j = 0; j < n; j += Vec::kLanes)
    max_v = Vec::max(max_v, Vec::load_masked_fill(s + j, Vec::mask(n - j), neg_inf));
  const V mv = Vec::set1(Vec::reduce_max(max_v));
  V sum_v = Vec::zero();
  for (int64_t j = 0; j < n; j += Vec::kLanes) {
    const auto m = Vec::mask(n - j);
    const V e = Vec::exp(Vec::sub(Vec::load_masked_fill(s + j, m, neg_inf), mv));
    sum_v = Vec::add(sum_v, e);
    Vec::store_masked(s + j, m, e);
  }
  return 1.0f / Vec::reduce_add(sum_v);
}

template <class Vec>
void scale_row(float* x, int64_t n, float factor) {
  const auto f = Vec::set1(factor);
  for (int64_t c = 0; c < n; c += Vec::kLanes) {
    const auto m = Vec::mask(n - c);
    Vec::store_masked(x + c, m, Vec::mul(Vec::load_masked(x + c, m), f));
  }
}

// One (query, head block): scores for all visible rows, softmax, weighted sum of value rows.
//   q_rows[h]: the head's query; key_row(t) / value_row(t): the t-th visible row (t < n_vis);
//   scores: scratch for nh·n_vis floats.
// Rows go in blocks of kBlockRows (about 150 KB of MLA cache, L2-resident) and every head tile
// sweeps the block, so a cache row comes from memory once per task however many heads it has.
template <class Vec, class KeyRow, class ValueRow>
void attend(int nh, const float* const* q_rows, int64_t qk_dim, int64_t n_vis, KeyRow key_row,
            ValueRow value_row, int64_t v_dim, float scale, float* const* out, float* scores) {
  for (int h = 0; h < nh; ++h) std::fill(out[h], out[h] + v_dim, 0.0f);
  if (n_vis <= 0) return;
  const float* rows[kBlockRows];
  for (int64_t b0 = 0; b0 < n_vis; b0 += kBlockRows) {
    const int nb = static_cast<int>(std::min<int64_t>(kBlockRows, n_vis - b0));
    for (int r = 0; r < nb; ++r) rows[r] = key_row(b0 + r);
    for (int hq = 0; hq < nh; hq += kTileHeads) {
      const int nhq = std::min(kTileHeads, nh - hq);
      for (int r0 = 0; r0 < nb; r0 += kTileRows)
        dot_tile_any<Vec>(nhq, std::min(kTileRows, nb - r0), q_rows + hq, rows + r0, qk_dim, scale,
                          scores + hq * n_vis + b0 + r0, n_vis);
    }
  }
  float inv_sum[kMaxTaskHeads];
  for (int h = 0; h < nh; ++h) inv_sum[h] = exp_and_inverse_sum<Vec>(scores + h * n_vis, n_vis);
  const float* w[kMaxTaskHeads];
  for (int64_t b0 = 0; b0 < n_vis; b0 += kBlockRows) {
    const int nb = static_cast<int>(std::min<int64_t>(kBlockRows, n_vis - b0));
    for (int r = 0; r < nb; ++r) rows[r] = value_row(b0 + r);
    for (int h = 0; h < nh; ++h) w[h] = scores + h * n_vis + b0;
    accum_block<Vec>(nh, w, rows, nb, v_dim, out);
  }
  for (int h = 0; h < nh; ++h) scale_row<Vec>(out[h], v_dim, inv_sum[h]);
}

template <class Vec>
void mla_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a) {
  const int64_t d = int64_t{a.latent_dim} + a.rope_dim;
  const int n_heads = a.n_heads;
  int64_t max_vis = 1;
  for (int64_t i = 0; i < a.n_q; ++i)
    max_vis = std::max<int64_t>(max_vis, std::min<int64_t>(a.q_pos[i] + 1, a.n_ctx));
  // Heads per task: all of a query's heads when there are enough queries to fill the pool (each
  // cache row is then read once per query for every head); otherwise split, in multiples of the
  // head tile, so a single decode query still spreads over the threads. Capped so the score
  // scratch stays bounded at long contexts.
  const int64_t want_blocks = (pool.n_threads() + a.n_q - 1) / a.n_q;
  int64_t heads_per_task = (n_heads + want_blocks - 1) / want_blocks;
  heads_per_task = (heads_per_task + kTileHeads - 1) / kTileHeads * kTileHeads;
  heads_per_task =
      std::min<int64_t>(heads_per_task, std::max<int64_t>(kTileHeads, kMaxScoreFloats / max_vis));
  heads_per_task = std::clamp<int64_t>(heads_per_task, 1, std::min(n_heads, kMaxTaskHeads));
  const int64_t blocks_per_q = (n_heads + heads_per_task - 1) / heads_per_task;
  pool.parallel_for(a.n_q * blocks_per_q, [&](int64_t task) {
    const int64_t i = task / blocks_per_q;
    const int64_t h0 = task % blocks_per_q * heads_per_task;
    const int nh = static_cast<int>(std::min<int64_t>(heads_per_task, n_heads - h0));
    const float* q_rows[kMaxTaskHeads];
    float* out[kMaxTaskHeads];
    for (int h = 0; h < nh; ++h) {
      q_rows[h] = a.q + ((i * n_heads) + h0 + h) * d;
      out[h] = a.out + ((i * n_heads) + h0 + h) * a.latent_dim;
    }
    const int64_t n_vis = std::min<int64_t>(a.q_pos[i] + 1, a.n_ctx);
    // Paged rows (kernels/attention.h); attend() gathers them into position-ordered pointer
    // blocks, so the arithmetic never sees the page boundaries.
    auto row = [&](int64_t j) { return a.block_rows[j / a.block_size] + (j % a.block_size) * d; };
    const auto scores =
        std::make_unique_for_overwrite<float[]>(static_cast<size_t>(nh * std::max<int64_t>(n_vis, 1)));
    attend<Vec>(nh, q_rows, d, n_vis, row, row, a.latent_dim, a.scale, out, scores.get());
  });
}

// Plain multi-head attention. A task is (head, tile of kTileHeads consecutive queries): the tile's
// queries share each K/V row load the way a query's heads share cache rows in the absorbed form.
// Each query keeps its own compact score row over the rows visible to it, so its scores, their
// sum and its fma chains are exactly those it would have alone; rows visible to another query of
// the tile but not to it enter its value sum with weight 0, which adds exactly nothing for finite
// V (a non-finite V row beyond a query's position would make it NaN).
template <class Vec>
void mha(ThreadPool& pool, const MhaArgs& a) {
  const int64_t n_heads = a.n_heads;
  const int64_t n_tiles = (a.n_q + kTileHeads - 1) / kTileHeads;
  // Head-major task order: consecutive tasks (on any thread) read the same head's K/V rows,
  // which then stay cache-resident instead of streaming every head's K/V once per query.
  pool.parallel_for(n_heads * n_tiles, [&](int64_t task) {
    const int64_t h = task / n_tiles;
    const int64_t i0 = task % n_tiles * kTileHeads;
    const int nq = static_cast<int>(std::min<int64_t>(kTileHeads, a.n_q - i0));
    const float* q_rows[kTileHeads];
    float* out[kTileHeads];
    int64_t n_vis[kTileHeads] = {};
    int32_t max_pos = std::numeric_limits<int32_t>::min();
    for (int q = 0; q < nq; ++q) {
      q_rows[q] = a.q + ((i0 + q) * n_heads + h) * a.qk_dim;
      out[q] = a.out + ((i0 + q) * n_heads + h) * a.v_dim;
      std::fill(out[q], out[q] + a.v_dim, 0.0f);
      max_pos = std::max(max_pos, a.q_pos[i0 + q]);
    }
    std::vector<int64_t> rows;  // rows visible to at least one query of the tile, ascending
    rows.reserve(static_cast<size_t>(a.n_kv));
    for (int64_t j = 0; j < a.n_kv; ++j) {
      if (a.kv_pos[j] > max_pos) continue;
      rows.push_back(j);
      for (int q = 0; q < nq; ++q) n_vis[q] += a.kv_pos[j] <= a.q_pos[i0 + q];
    }
    const int64_t n_rows = static_cast<int64_t>(rows.size());
    if (n_rows == 0) return;
    auto visible = [&](int q, int64_t j) { return a.kv_pos[j] <= a.q_pos[i0 + q]; };
    const auto scores = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(nq * n_rows));
    float* s_row[kTileHeads];
    for (int q = 0; q < nq; ++q) s_row[q] = scores.get() + q * n_rows;

    int64_t rank[kTileHeads] = {};
    const float* k_rows[kTileRows];
    float tile[kTileHeads * kTileRows];
    for (int64_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kTileRows, n_rows - r0));
      for (int r = 0; r < nr; ++r) k_rows[r] = a.k + (rows[r0 + r] * n_heads + h) * a.qk_dim;
      dot_tile_any<Vec>(nq, nr, q_rows, k_rows, a.qk_dim, a.scale, tile, kTileRows);
      for (int q = 0; q < nq; ++q)
        for (int r = 0; r < nr; ++r)
          if (visible(q, rows[r0 + r])) s_row[q][rank[q]++] = tile[q * kTileRows + r];
    }
    float inv_sum[kTileHeads] = {};
    for (int q = 0; q < nq; ++q)
      if (n_vis[q] > 0) inv_sum[q] = exp_and_inverse_sum<Vec>(s_row[q], n_vis[q]);

    std::fill(rank, rank + kTileHeads, 0);
    const float* v_rows[kBlockRows];
    float w_block[kTileHeads][kBlockRows];
    const float* w[kTileHeads];
    for (int64_t b0 = 0; b0 < n_rows; b0 += kBlockRows) {
      const int nb = static_cast<int>(std::min<int64_t>(kBlockRows, n_rows - b0));
      for (int t = 0; t < nb; ++t) v_rows[t] = a.v + (rows[b0 + t] * n_heads + h) * a.v_dim;
      for (int q = 0; q < nq; ++q) {
        for (int t = 0; t < nb; ++t) w_block[q][t] = visible(q, rows[b0 + t]) ? s_row[q][rank[q]++] : 0.0f;
        w[q] = w_block[q];
      }
      accum_block<Vec>(nq, w, v_rows, nb, a.v_dim, out);
    }
    for (int q = 0; q < nq; ++q) scale_row<Vec>(out[q], a.v_dim, inv_sum[q]);
  });
}

}  // namespace ds::x86_attention
