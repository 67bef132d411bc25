// AVX-512 matmul. Every output y[i, n] is computed by tile<F, MR, NR> for some MR, NR, and
// every tile runs, per (i, n), the same operations: for k-chunk c = 0, 1, ... (16 columns each,
// the last one zero-masked) acc = fma(x[i, 16c + l], W[n, 16c + l], acc) in lane l, then hsum16.
// Tile shape, cache blocking and thread split only reorder independent (i, n) pairs, so the
// result is bit-identical whatever m, row position or thread range (batch invariance).
#include "kernels/x86/avx512/matmul_avx512.h"

#include "kernels/x86/avx512/matmul_fp4_avx512.h"

// GCC 12 flags _mm512_undefined_*() inside its own intrinsic headers as (maybe-)uninitialized
// (a known false positive); the pragma must be active where the header is parsed.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/x86/avx512/fp8_decode_avx512.h"
#include "kernels/x86/avx512/panel_gemm_avx512.h"
#include "kernels/x86/row_prefetch.h"

namespace ds {
namespace {

#define DS_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 16;
using x86_prefetch::RowPrefetch;

// How a tile prefetches its W rows: not at all (they are in L2 already), as streams running
// `kStreamDistance` ahead across tile boundaries (bf16/f32 strips at m <= 4, which read W from DRAM
// at the memory's rate), or at the same offset one tile ahead (fp8 strips, whose conversion makes them
// compute-bound on one thread, and the first strip of a GEMM panel). Measured
// (matmul_cpu_bench --rows 65536 --cols 2048 --paired-reads 15, bf16, Zen 5, share of the read rate of
// the same moment): m = 1 0.76 (1 KiB in-row) -> 0.91-0.93 streaming, m = 2 0.70 -> 0.94, m = 4
// 0.71 -> 0.80.
enum class WPrefetch { none, stream, tile_ahead };

template <WeightFormat F>
struct Format;

template <>
struct Format<WeightFormat::f32> {
  using T = float;
  static DS_INLINE __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static DS_INLINE __m512 load_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

template <>
struct Format<WeightFormat::bf16> {
  using T = uint16_t;
  // bf16 is the top half of an f32: zero-extend to 32 bits and shift up (exact).
  static DS_INLINE __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static DS_INLINE __m512 load(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static DS_INLINE __m512 load_tail(const uint16_t* p, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, p));
  }
};

template <>
struct Format<WeightFormat::fp8_e4m3_block> {
  using T = uint8_t;
  // fp8 · 2^-120 exactly (avx512_fp8::widen); multiplied by scale · 2^120 it is the reference's
  // fp8 · scale rounded once. Codes 0x7f/0xff decode as ±480 (not NaN). Needs MXCSR.DAZ off.
  static DS_INLINE __m512 load(const uint8_t* p) { return avx512_fp8::load(p); }
  static DS_INLINE __m512 load_tail(const uint8_t* p, __mmask16 m) { return avx512_fp8::load_tail(p, m); }
};

constexpr float kFp8Fold = avx512_fp8::kFold;  // undoes the 2^-120 of the fp8 widening

// Fixed reduction tree shared by every tile: (l + l+8), then (l + l+4), (l + l+2), (l + l+1).
DS_INLINE float hsum16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
  return _mm_cvtss_f32(d);
}

// How the 16 f32 lanes of a W chunk get their fp8 block scale: apply(j, wv) for W row j of the
// tile (chunk_loop also calls advance() after each chunk). All three give lane l of chunk c the
// factor scale(row, column 16c + l) · 2^120 (or none), so the choice never changes a bit.
struct NoScale {
  DS_INLINE __m512 apply(int /*j*/, __m512 wv) const { return wv; }
  DS_INLINE void advance() {}
};

// block_cols % 16 == 0: a chunk never straddles a k-block, so each W row needs one broadcast
// factor per chunk, read from a per-tile table of folded scales.
constexpr int64_t kMaxFoldedBlocks = 256;  // cols up to 256 k-blocks (32768 at block 128)

template <int NR>
struct BlockScale {
  // The current block's factors as full vectors: a plain memory operand in the multiply keeps
  // all 32 zmm registers free for accumulators and chunks.
  alignas(64) float sv[NR][kLanes];
  DS_INLINE __m512 apply(int j, __m512 wv) const { return _mm512_mul_ps(wv, _mm512_load_ps(sv[j])); }
};

// Any block shape (tiny test models): per-lane factors rebuilt for every chunk.
template <int NR>
struct LaneScale {
  const float* srow[NR];  // each W row's scales: [scale_cols]
  int64_t block_cols = 1;
  int64_t cols = 0;
  int64_t k0 = 0;
  alignas(64) float sv[NR][kLanes];
  void fill() {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) {
        const int64_t k = std::min(k0 + l, cols - 1);  // lanes past cols are zero-masked anyway
        sv[j][l] = srow[j][k / block_cols] * kFp8Fold;
      }
    }
  }
  DS_INLINE __m512 apply(int j, __m512 wv) const { return _mm512_mul_ps(wv, _mm512_load_ps(sv[j])); }
  void advance() {
    k0 += kLanes;
    fill();
  }
};

// One 16-column chunk at k0 for an MR × NR tile.
template <WeightFormat F, int MR, int NR, bool kTail, class Scale>
DS_INLINE void chunk(__m512 (&acc)[MR][NR], const float* const (&xr)[MR],
                     const typename Format<F>::T* const (&wr)[NR], int64_t k0, __mmask16 tail_mask,
                     const Scale& scale) {
  using Fm = Format<F>;
  __m512 wv[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    wv[j] = scale.apply(j, kTail ? Fm::load_tail(wr[j] + k0, tail_mask) : Fm::load(wr[j] + k0));
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 xv = kTail ? _mm512_maskz_loadu_ps(tail_mask, xr[i] + k0) : _mm512_loadu_ps(xr[i] + k0);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

// All chunks of the row in order; the last one is zero-masked when cols % 16 != 0.
template <WeightFormat F, int MR, int NR, bool kPrefetchW, class Scale>
DS_INLINE void chunk_loop(__m512 (&acc)[MR][NR], const float* const (&xr)[MR],
                          const typename Format<F>::T* const (&wr)[NR], int64_t cols, Scale& scale,
                          const RowPrefetch& prefetch) {
  const int64_t n_full = cols / kLanes;
  const int rem = static_cast<int>(cols % kLanes);
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << rem) - 1u);
  for (int64_t c = 0; c < n_full; ++c) {
    // W coming from DRAM: one prefetch per 64-byte line of every W row.
    constexpr int64_t kChunksPerLine = std::max<int64_t>(1, 64 / (kLanes * sizeof(typename Format<F>::T)));
    if (kPrefetchW && c % kChunksPerLine == 0) {
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) {
        prefetch.touch(wr[j], c * kLanes * int64_t{sizeof(typename Format<F>::T)});
      }
    }
    chunk<F, MR, NR, false>(acc, xr, wr, c * kLanes, tail_mask, scale);
    scale.advance();
  }
  if (rem != 0) chunk<F, MR, NR, true>(acc, xr, wr, n_full * kLanes, tail_mask, scale);
}

// chunk_loop for fp8 with block_cols % 16 == 0: k-blocks outer (one broadcast factor per W row
// and block), the block's chunks inner. Same chunks in the same order as chunk_loop.
template <int MR, int NR, bool kPrefetchW>
DS_INLINE void chunk_loop_blocked(__m512 (&acc)[MR][NR], const float* const (&xr)[MR],
                                  const uint8_t* const (&wr)[NR], int64_t cols,
                                  const float (&folded)[NR][kMaxFoldedBlocks], int64_t n_blocks,
                                  int64_t chunks_per_block, const RowPrefetch& prefetch) {
  constexpr WeightFormat F = WeightFormat::fp8_e4m3_block;
  const int64_t n_full = cols / kLanes;
  const int rem = static_cast<int>(cols % kLanes);
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << rem) - 1u);
  BlockScale<NR> scale;
  int64_t c = 0;
  for (int64_t kb = 0; kb < n_blocks; ++kb) {
    for (int j = 0; j < NR; ++j) _mm512_store_ps(scale.sv[j], _mm512_set1_ps(folded[j][kb]));
    const int64_t c_end = std::min(n_full, c + chunks_per_block);
    for (; c < c_end; ++c) {
      // W coming from DRAM: one prefetch per 64-byte line of every W row.
      constexpr int64_t kChunksPerLine = 64 / (kLanes * sizeof(uint8_t));  // fp8: 4
      if (kPrefetchW && c % kChunksPerLine == 0) {
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) {
          prefetch.touch(wr[j], c * kLanes * int64_t{sizeof(typename Format<F>::T)});
        }
      }
      chunk<F, MR, NR, false>(acc, xr, wr, c * kLanes, tail_mask, scale);
    }
  }
  // The tail chunk lies in the last block, whose factors are still in `scale`.
  if (rem != 0) chunk<F, MR, NR, true>(acc, xr, wr, n_full * kLanes, tail_mask, scale);
}

// y[i0 + i, n0 + j] for i < MR, j < NR. x points at row i0, y at row i0 (column 0).
// wp: how this tile prefetches W (none: another strip pulled the rows into L2 already).
template <WeightFormat F, int MR, int NR>
void tile(const MatmulArgs& a, const float* x, int64_t n0, float* y, WPrefetch wp) {
  using T = typename Format<F>::T;
  const WeightMatrix& w = *a.w;
  const int64_t cols = w.cols;
  const float* xr[MR];
  for (int i = 0; i < MR; ++i) xr[i] = x + i * a.ldx;
  const T* wr[NR];
  for (int j = 0; j < NR; ++j) wr[j] = static_cast<const T*>(w.data) + (n0 + j) * cols;

  // The tile's NR rows are contiguous in W, and the next tile reads the NR rows after them. One
  // tile ahead measured up to 2x for the fp8 GEMV and the GEMM strips (against no prefetch).
  const int64_t row_bytes = cols * int64_t{sizeof(T)};
  const RowPrefetch prefetch = wp == WPrefetch::stream
                                   ? RowPrefetch::streaming(NR, row_bytes, x86_prefetch::kStreamDistance)
                                   : RowPrefetch::tile_ahead(NR, row_bytes);
  const bool prefetch_w = wp != WPrefetch::none;

  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();

  if constexpr (F != WeightFormat::fp8_e4m3_block) {
    NoScale none;
    if (prefetch_w) {
      chunk_loop<F, MR, NR, true>(acc, xr, wr, cols, none, prefetch);
    } else {
      chunk_loop<F, MR, NR, false>(acc, xr, wr, cols, none, prefetch);
    }
  } else {
    const int64_t n_blocks = w.scale_cols();
    const float* srow[NR];
    for (int j = 0; j < NR; ++j) srow[j] = w.scales + ((n0 + j) / w.block_rows) * n_blocks;
    if (w.block_cols % kLanes == 0 && n_blocks <= kMaxFoldedBlocks) {
      alignas(64) float folded[NR][kMaxFoldedBlocks];
      for (int j = 0; j < NR; ++j)
        for (int64_t b = 0; b < n_blocks; ++b) folded[j][b] = srow[j][b] * kFp8Fold;
      const int64_t chunks_per_block = w.block_cols / kLanes;
      if (prefetch_w) {
        chunk_loop_blocked<MR, NR, true>(acc, xr, wr, cols, folded, n_blocks, chunks_per_block, prefetch);
      } else {
        chunk_loop_blocked<MR, NR, false>(acc, xr, wr, cols, folded, n_blocks, chunks_per_block, prefetch);
      }
    } else {
      LaneScale<NR> scale;
      for (int j = 0; j < NR; ++j) scale.srow[j] = srow[j];
      scale.block_cols = w.block_cols;
      scale.cols = cols;
      scale.fill();
      chunk_loop<F, MR, NR, false>(acc, xr, wr, cols, scale, prefetch);  // tiny test models only
    }
  }

  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * a.ldy + n0 + j] = hsum16(acc[i][j]);
}

// All W rows [n_begin, n_end) against MR rows of x: full NR tiles, then single rows.
template <WeightFormat F, int MR, int NR>
void row_strip(const MatmulArgs& a, const float* x, int64_t n_begin, int64_t n_end, float* y, WPrefetch wp) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) tile<F, MR, NR>(a, x, n, y, wp);
  for (; n < n_end; ++n) tile<F, MR, 1>(a, x, n, y, wp);
}

template <WeightFormat F>
void strip_for_rows(int mr, const MatmulArgs& a, const float* x, int64_t n_begin, int64_t n_end, float* y,
                    WPrefetch wp) {
  constexpr int NR = kAvx512TileN;
  switch (mr) {
    case 1:
      row_strip<F, 1, NR>(a, x, n_begin, n_end, y, wp);
      break;
    case 2:
      row_strip<F, 2, NR>(a, x, n_begin, n_end, y, wp);
      break;
    case 3:
      row_strip<F, 3, NR>(a, x, n_begin, n_end, y, wp);
      break;
    case 4:
      row_strip<F, 4, NR>(a, x, n_begin, n_end, y, wp);
      break;
    case 5:
      row_strip<F, 5, NR>(a, x, n_begin, n_end, y, wp);
      break;
    default:
      row_strip<F, 6, NR>(a, x, n_begin, n_end, y, wp);
      break;
  }
}
static_assert(kAvx512TileM == 6, "strip_for_rows handles heights 1..6");

// fp8 GEMV with power-of-two block scales (V4's E8M0 scales): the block factor S = scale · 2^120
// moves from the weights onto x, once per (block row, k-block) instead of once per W chunk, which
// drops a multiply from the 5 vector ops per 16 weights. Bit-identical where it runs: the general
// tile computes fma(x, fl(w·S), acc) and this one fma(w, fl(x·S), acc); both products are exact
// (w·S is fp8 · scale, exact when the scale is a power of two ≥ 2^-117 so the result stays normal;
// x·S is exact because S ≥ 1 is a power of two, unless it overflows), so both round
// x·w·S + acc once. A block row whose scales or x fail the conditions takes the general tile.
bool fold_block_row(const MatmulArgs& a, int64_t block_row, float* xs) {
  const WeightMatrix& w = *a.w;
  const int64_t n_blocks = w.scale_cols();
  const float* srow = w.scales + block_row * n_blocks;
  __mmask16 overflow = 0;
  for (int64_t kb = 0; kb < n_blocks; ++kb) {
    const float scale = srow[kb];
    uint32_t bits;
    __builtin_memcpy(&bits, &scale, 4);
    // A positive power of two in [2^-117, 2^8): S = scale · 2^120 in [8, 2^128).
    const uint32_t exponent = (bits >> 23) & 0xffu;
    if ((bits & 0x807fffffu) != 0 || exponent < 127 - 117 || exponent >= 127 + 8) return false;
    const __m512 sv = _mm512_set1_ps(scale * kFp8Fold);
    const int64_t k_end = std::min(w.cols, (kb + 1) * w.block_cols);
    for (int64_t k = kb * w.block_cols; k < k_end; k += kLanes) {
      const __mmask16 m = k_end - k >= kLanes ? static_cast<__mmask16>(0xFFFF)
                                              : static_cast<__mmask16>((1u << (k_end - k)) - 1u);
      const __m512 xv = _mm512_maskz_loadu_ps(m, a.x + k);
      const __m512 p = _mm512_mul_ps(xv, sv);
      // x·S overflowed to ±inf from a finite x (an infinite or NaN x gives NaN on both paths).
      overflow |= _mm512_mask_fpclass_ps_mask(m, p, 0x18) & ~_mm512_mask_fpclass_ps_mask(m, xv, 0x18);
      _mm512_mask_storeu_ps(xs + k, m, p);
    }
  }
  return overflow == 0;
}

template <int NR>
void gemv_fp8_folded_rows(const MatmulArgs& a, const float* xs, int64_t n0, int64_t n1) {
  constexpr WeightFormat F = WeightFormat::fp8_e4m3_block;
  const int64_t cols = a.w->cols;
  const float* const xr[1] = {xs};
  const RowPrefetch prefetch = RowPrefetch::tile_ahead(NR, cols);
  NoScale none;
  for (int64_t n = n0; n < n1; n += NR) {
    const uint8_t* wr[NR];
    for (int j = 0; j < NR; ++j) wr[j] = static_cast<const uint8_t*>(a.w->data) + (n + j) * cols;
    __m512 acc[1][NR];
    for (int j = 0; j < NR; ++j) acc[0][j] = _mm512_setzero_ps();
    chunk_loop<F, 1, NR, true>(acc, xr, wr, cols, none, prefetch);
    for (int j = 0; j < NR; ++j) a.y[n + j] = hsum16(acc[0][j]);
  }
}

// The m = 1 fp8 strip: block row by block row, folded where the conditions hold.
void gemv_fp8(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  constexpr int NR = kAvx512GemvTileN;
  const WeightMatrix& w = *a.w;
  if (w.block_cols % kLanes != 0 || w.block_rows % NR != 0) {  // tiny test shapes: the general tile
    row_strip<WeightFormat::fp8_e4m3_block, 1, NR>(a, a.x, n_begin, n_end, a.y, WPrefetch::tile_ahead);
    return;
  }
  std::vector<float> xs(static_cast<size_t>(w.cols));
  int64_t n = n_begin;
  while (n < n_end) {
    const int64_t block_row = n / w.block_rows;
    const int64_t row_end = std::min(n_end, (block_row + 1) * w.block_rows);
    // Whole NR tiles inside this block row fold; the rest (a range's ragged ends) does not.
    const int64_t fold_begin = std::min(row_end, (n + NR - 1) / NR * NR);
    const int64_t fold_end = fold_begin + (row_end - fold_begin) / NR * NR;
    if (fold_end > fold_begin && fold_block_row(a, block_row, xs.data())) {
      row_strip<WeightFormat::fp8_e4m3_block, 1, NR>(a, a.x, n, fold_begin, a.y, WPrefetch::tile_ahead);
      gemv_fp8_folded_rows<NR>(a, xs.data(), fold_begin, fold_end);
      row_strip<WeightFormat::fp8_e4m3_block, 1, NR>(a, a.x, fold_end, row_end, a.y, WPrefetch::tile_ahead);
    } else {
      row_strip<WeightFormat::fp8_e4m3_block, 1, NR>(a, a.x, n, row_end, a.y, WPrefetch::tile_ahead);
    }
    n = row_end;
  }
}

// ---- fp8 GEMM over decoded panels (avx512_panel::panel_gemm) ----
// tile<fp8> converts its W chunks again for every 6 rows of x (4 vector ops per 16 weights against
// 6 × 16 FMAs). From kFp8PanelMinRows rows on, each W row is decoded once per x panel instead: lane l
// of chunk c becomes fl(widen(w) · scale(n, 16c + l) · 2^120), the very product chunk() multiplies
// x[16c + l] by (BlockScale and LaneScale give every lane that factor), so the result is bit for
// bit tile<fp8>'s. Only for block_cols % 16 == 0 (every real checkpoint); other shapes keep the tiles.
// The cutover (matmul_cpu_bench --format fp8, 1024 x 2048, one thread, Zen 4, GFLOP/s, tiles vs
// panels, means of 3): m = 12 86 vs 79, m = 16 75 vs 82, m = 32 81 vs 92, m = 384 82 vs 97. (bf16
// keeps its tiles: its widening is cheap and the panel was slower at every m, 98 vs 57 at m = 8,
// 90 vs 83 at m = 384.)
constexpr int64_t kFp8PanelMinRows = 16;

// dst[r * ldd + k] = x[row0 + r, k], zero for cols <= k < chunk_cols.
void copy_x_rows(const MatmulArgs& a, int64_t row0, int64_t n_rows, int64_t chunk_cols, float* dst,
                 int64_t ldd) {
  const int64_t cols = a.w->cols;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* src = a.x + (row0 + r) * a.ldx;
    float* out = dst + r * ldd;
    std::copy(src, src + cols, out);
    std::fill(out + cols, out + chunk_cols, 0.0f);
  }
}

void fp8_panel_gemm(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t chunk_cols = (a.w->cols + kLanes - 1) / kLanes * kLanes;
  avx512_panel::panel_gemm(
      a, n_begin, n_end, chunk_cols,
      [&](int64_t row0, int64_t n_rows, float* dst, int64_t ldp) {
        copy_x_rows(a, row0, n_rows, chunk_cols, dst, ldp);
      },
      [&](int64_t n0, int64_t nr, float* dst, int64_t ldp) {
        avx512_fp8::decode_rows_f32(*a.w, n0, nr, dst, ldp);
      });
}

template <WeightFormat F>
void run(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  using T = typename Format<F>::T;
  if constexpr (F == WeightFormat::fp8_e4m3_block) {
    if (a.m == 1) return gemv_fp8(a, n_begin, n_end);
    if (a.m >= kFp8PanelMinRows && a.w->block_cols % kLanes == 0) return fp8_panel_gemm(a, n_begin, n_end);
  }
  // bf16/f32 weights stream from DRAM at the memory's rate: prefetch as streams (WPrefetch).
  constexpr WPrefetch small_m = F == WeightFormat::fp8_e4m3_block ? WPrefetch::tile_ahead : WPrefetch::stream;
  if (a.m == 1) {
    row_strip<F, 1, kAvx512GemvTileN>(a, a.x, n_begin, n_end, a.y, small_m);
    return;
  }
  // Small batches (decode with a few sequences, or a token plus its MTP draft): one strip, W
  // streamed from DRAM once; wider tiles than the GEMM's keep more W rows in flight (registers:
  // MR·NR accumulators + NR W chunks). fp8 at m = 4 keeps the GEMM's 4 × 4: its conversion needs
  // registers a 4 × 6 tile no longer has (measured slower).
  if (a.m == 2) {
    row_strip<F, 2, 8>(a, a.x, n_begin, n_end, a.y, small_m);
    return;
  }
  if (a.m == 3) {
    row_strip<F, 3, 6>(a, a.x, n_begin, n_end, a.y, small_m);
    return;
  }
  if (a.m == 4 && F != WeightFormat::fp8_e4m3_block) {
    row_strip<F, 4, 6>(a, a.x, n_begin, n_end, a.y, small_m);
    return;
  }
  // Cache blocking: a panel of x rows (~3 MiB, L3) is swept against blocks of W rows (~384 KiB,
  // L2) so W is re-read from DRAM once per panel and x from L3 once per W block.
  const int64_t row_bytes = std::max<int64_t>(1, a.w->cols * static_cast<int64_t>(sizeof(T)));
  const int64_t block_n =
      std::max<int64_t>(kAvx512TileN, (int64_t{384} << 10) / row_bytes / kAvx512TileN * kAvx512TileN);
  const int64_t x_row_bytes = std::max<int64_t>(1, a.w->cols * 4);
  const int64_t panel_m =
      std::max<int64_t>(kAvx512TileM, (int64_t{3} << 20) / x_row_bytes / kAvx512TileM * kAvx512TileM);
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t ne = std::min(n_end, nb + block_n);
      for (int64_t i0 = mb; i0 < me; i0 += kAvx512TileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kAvx512TileM, me - i0));
        // The panel's first strip pulls the W block into L2; the others find it there.
        strip_for_rows<F>(mr, a, a.x + i0 * a.ldx, nb, ne, a.y + i0 * a.ldy,
                          i0 == mb ? WPrefetch::tile_ahead : WPrefetch::none);
      }
    }
  }
}

}  // namespace

void matmul_cols_avx512(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
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
      matmul_cols_fp4_avx512(args, n_begin, n_end);
      break;
  }
}

}  // namespace ds
