// AVX2 matmul. Same structure as the AVX-512 path with 8 lanes: every y[i, n] is computed by
// tile<F, MR, NR> for some MR, NR, each running per (i, n) the same operations: for k-chunk
// c = 0, 1, ... (8 columns each, the last one zero-padded) acc = fma(x[i, 8c + l], W[n, 8c + l],
// acc) in lane l, then hsum8. Tile shape, cache blocking and the thread split only reorder
// independent (i, n) pairs, so results are bit-identical whatever m (batch invariance).
#include "kernels/x86/avx2/matmul_avx2.h"

#include "kernels/x86/avx2/matmul_fp4_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/x86/row_prefetch.h"

namespace ds {
namespace {

#define DS_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 8;

template <WeightFormat F>
struct Format;

template <>
struct Format<WeightFormat::f32> {
  using T = float;
  static DS_INLINE __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};

template <>
struct Format<WeightFormat::bf16> {
  using T = uint16_t;
  // bf16 is the top half of an f32: zero-extend to 32 bits and shift up (exact).
  static DS_INLINE __m256 load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

template <>
struct Format<WeightFormat::fp8_e4m3_block> {
  using T = uint8_t;
  // Same decoding as the AVX-512 path: sign-extend, << 20, keep bits 31 and 20..26; the f32 is
  // fp8 · 2^-120 exactly. Codes 0x7f/0xff decode as ±480 (not NaN). Needs MXCSR.DAZ off.
  static DS_INLINE __m256 load(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m256i v = _mm256_slli_epi32(_mm256_cvtepi8_epi32(b), 20);
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0x87f00000u))));
  }
};

constexpr float kFp8Fold = 0x1p120f;       // undoes the 2^-120 of Format<fp8>::load
constexpr int64_t kMaxFoldedBlocks = 256;  // per-tile table of folded scales (cols <= 32768 at 128)

// Fixed reduction tree shared by every tile: (l + l+4), then (l + l+2), (l + l+1).
DS_INLINE float hsum8(__m256 v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
  return _mm_cvtss_f32(d);
}

// One 8-column chunk for an MR × NR tile; xp/wp point at the chunk (the tail chunk's W comes
// from a zero-padded copy, its x through a lane mask). sv: per W row, 8 lane scales (fp8 only).
template <WeightFormat F, int MR, int NR, bool kTail>
DS_INLINE void chunk(__m256 (&acc)[MR][NR], const float* const (&xr)[MR], int64_t k0,
                     const typename Format<F>::T* const (&wp)[NR], __m256i tail_mask,
                     const float (&sv)[NR][kLanes]) {
  __m256 xv[MR];
  for (int i = 0; i < MR; ++i) {
    xv[i] = kTail ? _mm256_maskload_ps(xr[i] + k0, tail_mask) : _mm256_loadu_ps(xr[i] + k0);
  }
  for (int j = 0; j < NR; ++j) {
    __m256 wv = Format<F>::load(wp[j]);
    if constexpr (F == WeightFormat::fp8_e4m3_block) wv = _mm256_mul_ps(wv, _mm256_load_ps(sv[j]));
    for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
  }
}

template <WeightFormat F, int MR, int NR>
struct TileState {
  using T = typename Format<F>::T;
  const float* xr[MR];
  const T* wr[NR];
  x86_prefetch::RowPrefetch prefetch;  // used by the kStream tiles only
  alignas(32) T wtail[NR][kLanes];     // zero-padded copy of each W row's last partial chunk
  int64_t n_full = 0;
  __m256i tail_mask;
};

// Chunks [c_begin, c_end); the chunk at n_full (if any) is the zero-padded tail. kStream: W rows
// come from DRAM, prefetched as streams (x86/row_prefetch.h), one prefetch per 64-byte line.
template <WeightFormat F, int MR, int NR, bool kStream>
DS_INLINE void chunk_range(__m256 (&acc)[MR][NR], const TileState<F, MR, NR>& s, int64_t c_begin,
                           int64_t c_end, const float (&sv)[NR][kLanes]) {
  using T = typename Format<F>::T;
  constexpr int64_t kChunksPerLine = std::max<int64_t>(1, 64 / (kLanes * int64_t{sizeof(T)}));
  const int64_t c_stop = std::min(c_end, s.n_full);
  for (int64_t c = c_begin; c < c_stop; ++c) {
    if (kStream && c % kChunksPerLine == 0) {
      for (int j = 0; j < NR; ++j) s.prefetch.touch(s.wr[j], c * kLanes * int64_t{sizeof(T)});
    }
    const T* wp[NR];
    for (int j = 0; j < NR; ++j) wp[j] = s.wr[j] + c * kLanes;
    chunk<F, MR, NR, false>(acc, s.xr, c * kLanes, wp, s.tail_mask, sv);
  }
  if (c_end > s.n_full) {
    const T* wp[NR];
    for (int j = 0; j < NR; ++j) wp[j] = s.wtail[j];
    chunk<F, MR, NR, true>(acc, s.xr, s.n_full * kLanes, wp, s.tail_mask, sv);
  }
}

// y[i0 + i, n0 + j] for i < MR, j < NR. x points at row i0, y at row i0 (column 0).
template <WeightFormat F, int MR, int NR, bool kStream>
void tile(const MatmulArgs& a, const float* x, int64_t n0, float* y) {
  using T = typename Format<F>::T;
  const WeightMatrix& w = *a.w;
  const int64_t cols = w.cols;
  TileState<F, MR, NR> s;
  for (int i = 0; i < MR; ++i) s.xr[i] = x + i * a.ldx;
  for (int j = 0; j < NR; ++j) s.wr[j] = static_cast<const T*>(w.data) + (n0 + j) * cols;
  s.n_full = cols / kLanes;
  s.prefetch =
      x86_prefetch::RowPrefetch::streaming(NR, cols * int64_t{sizeof(T)}, x86_prefetch::kStreamDistance);
  const int rem = static_cast<int>(cols % kLanes);
  const int64_t n_chunks = s.n_full + (rem != 0);
  alignas(32) int32_t mask_lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) mask_lanes[l] = l < rem ? -1 : 0;
  s.tail_mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_lanes));
  if (rem != 0) {
    for (int j = 0; j < NR; ++j) {
      std::memset(s.wtail[j], 0, sizeof(s.wtail[j]));
      std::memcpy(s.wtail[j], s.wr[j] + s.n_full * kLanes, static_cast<size_t>(rem) * sizeof(T));
    }
  }

  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  alignas(32) float sv[NR][kLanes];

  if constexpr (F != WeightFormat::fp8_e4m3_block) {
    chunk_range<F, MR, NR, kStream>(acc, s, 0, n_chunks, sv);
  } else {
    const int64_t bc = w.block_cols;
    const int64_t n_blocks = w.scale_cols();
    const float* srow[NR];
    for (int j = 0; j < NR; ++j) srow[j] = w.scales + ((n0 + j) / w.block_rows) * n_blocks;
    if (bc % kLanes == 0 && n_blocks <= kMaxFoldedBlocks) {
      // No chunk straddles a k-block: blocks outer, their chunks inner, one broadcast factor
      // (scale · 2^120) per W row and block; the tail chunk lies in the last block.
      alignas(32) float folded[NR][kMaxFoldedBlocks];
      for (int j = 0; j < NR; ++j)
        for (int64_t b = 0; b < n_blocks; ++b) folded[j][b] = srow[j][b] * kFp8Fold;
      const int64_t chunks_per_block = bc / kLanes;
      int64_t c = 0;
      for (int64_t kb = 0; kb < n_blocks; ++kb) {
        for (int j = 0; j < NR; ++j) _mm256_store_ps(sv[j], _mm256_set1_ps(folded[j][kb]));
        const int64_t c_end = std::min(s.n_full, c + chunks_per_block);
        chunk_range<F, MR, NR, kStream>(acc, s, c, c_end, sv);
        c = c_end;
      }
      if (n_chunks > s.n_full) chunk_range<F, MR, NR, kStream>(acc, s, s.n_full, n_chunks, sv);
    } else {
      // Any block shape: walk the k-blocks; lane l of chunk c always multiplies by the scale of
      // column 8c + l, broadcast within a block, per lane for a chunk straddling a block edge.
      int64_t c = 0;
      while (c < n_chunks) {
        const int64_t k0 = c * kLanes;
        const int64_t kb = k0 / bc;
        const int64_t block_end = std::min(cols, (kb + 1) * bc);
        const int64_t c_end = block_end == cols ? n_chunks : block_end / kLanes;
        if (c_end > c) {
          for (int j = 0; j < NR; ++j) _mm256_store_ps(sv[j], _mm256_set1_ps(srow[j][kb] * kFp8Fold));
          chunk_range<F, MR, NR, kStream>(acc, s, c, c_end, sv);
          c = c_end;
        } else {
          for (int j = 0; j < NR; ++j) {
            for (int l = 0; l < kLanes; ++l) {
              const int64_t k = std::min(k0 + l, cols - 1);
              sv[j][l] = srow[j][k / bc] * kFp8Fold;
            }
          }
          chunk_range<F, MR, NR, kStream>(acc, s, c, c + 1, sv);
          ++c;
        }
      }
    }
  }

  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * a.ldy + n0 + j] = hsum8(acc[i][j]);
}

template <WeightFormat F, int MR, int NR, bool kStream = false>
void row_strip(const MatmulArgs& a, const float* x, int64_t n_begin, int64_t n_end, float* y) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) tile<F, MR, NR, kStream>(a, x, n, y);
  for (; n < n_end; ++n) tile<F, MR, 1, kStream>(a, x, n, y);
}

static_assert(kAvx2TileM == 3, "run() handles strip heights 1..3");

template <WeightFormat F>
void run(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  using T = typename Format<F>::T;
  if (a.m == 1) {  // W from DRAM: prefetched as streams
    row_strip<F, 1, kAvx2GemvTileN, /*kStream=*/true>(a, a.x, n_begin, n_end, a.y);
    return;
  }
  // Cache blocking as in the AVX-512 path: x panels (~3 MiB, L3) against W row blocks
  // (~256 KiB, L2).
  const int64_t row_bytes = std::max<int64_t>(1, a.w->cols * static_cast<int64_t>(sizeof(T)));
  const int64_t block_n =
      std::max<int64_t>(kAvx2TileN, (int64_t{256} << 10) / row_bytes / kAvx2TileN * kAvx2TileN);
  const int64_t x_row_bytes = std::max<int64_t>(1, a.w->cols * 4);
  const int64_t panel_m =
      std::max<int64_t>(kAvx2TileM, (int64_t{3} << 20) / x_row_bytes / kAvx2TileM * kAvx2TileM);
  constexpr int NR = kAvx2TileN;
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t ne = std::min(n_end, nb + block_n);
      for (int64_t i0 = mb; i0 < me; i0 += kAvx2TileM) {
        const float* x = a.x + i0 * a.ldx;
        float* y = a.y + i0 * a.ldy;
        switch (std::min<int64_t>(kAvx2TileM, me - i0)) {
          case 1:
            row_strip<F, 1, NR>(a, x, nb, ne, y);
            break;
          case 2:
            row_strip<F, 2, NR>(a, x, nb, ne, y);
            break;
          default:
            row_strip<F, 3, NR>(a, x, nb, ne, y);
            break;
        }
      }
    }
  }
}

}  // namespace

void matmul_cols_avx2(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  if (args.m <= 0 || n_begin >= n_end) return;
  switch (args.w->format) {
    case WeightFormat::f32:
      run<WeightFormat::f32>(args, n_begin, n_end);
      break;
    case WeightFormat::bf16:
      run<WeightFormat::bf16>(args, n_begin, n_end);
      break;
    case WeightFormat::fp8_e4m3_block:
      run<WeightFormat::fp8_e4m3_block>(args, n_begin, n_end);
      break;
    case WeightFormat::fp4_e2m1_block:
      matmul_cols_fp4_avx2(args, n_begin, n_end);
      break;
  }
}

}  // namespace ds
