// AVX-512 FP4 matmul. The E8M0 scales are widened to f32 16 groups at a time (exactly as
// e8m0_to_f32). Per 32-column group g of W row n: the group's 16 bytes widen to 16 lanes;
// vpermps looks the low nibbles up in a 16-entry table {±0, ±0.5, ..., ±6} · scale(n, g) and then
// the high nibbles (shifted down 4; vpermps reads only the low 4 index bits). The table product
// is the reference's f32 product fp4 · 2^(e - 127), so each decoded weight is bit-identical to
// weight_at_ref. Lane l then does acc = fma(x[32g + 2l], w_lo, acc); acc = fma(x[32g + 2l + 1],
// w_hi, acc), then hsum16 (the same tree as the other formats). Every tile shape runs these
// operations per (i, n), so m, row position and the thread split never change a bit.
#include "kernels/x86/avx512/matmul_fp4_avx512.h"

// GCC 12 flags _mm512_undefined_*() inside its own intrinsic headers as (maybe-)uninitialized
// (a known false positive); the pragma must be active where the header is parsed.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>

#include "base/aligned_buffer.h"
#include "kernels/x86/avx512/panel_gemm_avx512.h"
#include "kernels/x86/fp4_pack.h"

namespace ds {
namespace {

#define DS_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 16;
constexpr int64_t kGroupCols = 32;   // columns per E8M0 scale = per 16-byte code load
constexpr int64_t kGroupBytes = 16;  // packed codes of one group

// 16 E8M0 bytes -> f32 exactly as e8m0_to_f32: b << 23, except 0 (2^-127, a subnormal) and 255 (NaN).
DS_INLINE __m512 e8m0_to_f32x16(__m128i bytes) {
  const __m512i b = _mm512_cvtepu8_epi32(bytes);
  __m512i bits = _mm512_slli_epi32(b, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()),
                               _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(0xff)),
                               _mm512_set1_epi32(0x7fc00000));
  return _mm512_castsi512_ps(bits);
}

DS_INLINE float hsum16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
  return _mm_cvtss_f32(d);
}

// One 32-column group g of an MR x NR tile: decode the NR rows' codes against their scaled
// tables, then the low nibbles (even columns) for every accumulator first and the high ones
// after: each x chunk is loaded once per tile and each accumulator still sees column 2l before
// 2l + 1.
template <int MR, int NR>
DS_INLINE void group(__m512 (&acc)[MR][NR], __m512 table, const float (&sc)[NR][kLanes], int64_t sc_idx,
                     const uint8_t* const (&wr)[NR], const float* xp, int64_t cols, int64_t g) {
  __m512 tab[NR];
  __m512i codes[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    tab[j] = _mm512_mul_ps(table, _mm512_set1_ps(sc[j][sc_idx]));
    codes[j] =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[j] + g * kGroupBytes)));
  }
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      wv[j] = _mm512_permutexvar_ps(half == 0 ? codes[j] : _mm512_srli_epi32(codes[j], 4), tab[j]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(xp + i * cols + g * kGroupCols + half * kLanes);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
}

// y[i0 + i, n0 + j] for i < MR, j < NR. xp: packed x rows (stride cols), y at row i0.
template <int MR, int NR>
void tile(const WeightMatrix& w, const float* xp, int64_t n0, float* y, int64_t ldy, bool prefetch_w) {
  const int64_t cols = w.cols;
  const int64_t n_groups = cols / kGroupCols;
  const int64_t row_bytes = cols / 2;
  const uint8_t* wr[NR];
  const uint8_t* sr[NR];
  for (int j = 0; j < NR; ++j) {
    wr[j] = static_cast<const uint8_t*>(w.data) + (n0 + j) * row_bytes;
    sr[j] = w.scales_e8m0 + (n0 + j) * n_groups;
  }
  // The next tile reads the NR rows after these: prefetch one tile ahead at the same offset.
  const int64_t prefetch_bytes = int64_t{NR} * row_bytes;
  if (prefetch_w) {
    for (int64_t b = 0; b < NR * n_groups; b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(sr[0] + NR * n_groups + b), _MM_HINT_T0);
    }
  }
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                      -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();

  // Scales are decoded 16 groups (512 columns) at a time into sc; each group then broadcasts its
  // row's factor from there into the table multiply.
  alignas(64) float sc[NR][kLanes];
  for (int64_t g0 = 0; g0 < n_groups; g0 += kLanes) {
    const int64_t g1 = std::min<int64_t>(n_groups, g0 + kLanes);
    const __mmask16 m = static_cast<__mmask16>((1u << (g1 - g0)) - 1u);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) _mm512_store_ps(sc[j], e8m0_to_f32x16(_mm_maskz_loadu_epi8(m, sr[j] + g0)));
    for (int64_t g = g0; g < g1; ++g) {
      if (prefetch_w && g % 4 == 0) {  // 4 groups = one 64-byte line of codes per row
#pragma GCC unroll 8
        for (int j = 0; j < NR; ++j) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[j] + g * kGroupBytes) + prefetch_bytes, _MM_HINT_T0);
        }
      }
      group<MR, NR>(acc, table, sc, g - g0, wr, xp, cols, g);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + n0 + j] = hsum16(acc[i][j]);
}

template <int MR, int NR>
void row_strip(const WeightMatrix& w, const float* xp, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
               bool prefetch_w) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) tile<MR, NR>(w, xp, n, y, ldy, prefetch_w);
  for (; n < n_end; ++n) tile<MR, 1>(w, xp, n, y, ldy, prefetch_w);
}

// 4 x 4 accumulators + 4 tables + 4 code vectors + 4 decoded weights fit the 32 zmm registers.
constexpr int kTileM = 4;
constexpr int kTileN = 4;

void strip_for_rows(int mr, const WeightMatrix& w, const float* xp, int64_t n_begin, int64_t n_end, float* y,
                    int64_t ldy, bool prefetch_w) {
  switch (mr) {
    case 1:
      return row_strip<1, kTileN>(w, xp, n_begin, n_end, y, ldy, prefetch_w);
    case 2:
      return row_strip<2, kTileN>(w, xp, n_begin, n_end, y, ldy, prefetch_w);
    case 3:
      return row_strip<3, kTileN>(w, xp, n_begin, n_end, y, ldy, prefetch_w);
    default:
      return row_strip<4, kTileN>(w, xp, n_begin, n_end, y, ldy, prefetch_w);
  }
}

// Small GEMM (4 <= m < kPanelMinRows): 4-row tiles decoding W in registers, over panels of packed
// x rows (~2 MiB) and blocks of W rows (~256 KiB of codes, L2).
void tile_gemm(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const WeightMatrix& w = *a.w;
  const int64_t cols = w.cols;
  const int64_t row_bytes = std::max<int64_t>(1, cols / 2 + cols / kGroupCols);
  const int64_t block_n = std::max<int64_t>(kTileN, (int64_t{256} << 10) / row_bytes / kTileN * kTileN);
  const int64_t panel_m =
      std::max<int64_t>(kTileM, (int64_t{2} << 20) / std::max<int64_t>(1, cols * 4) / kTileM * kTileM);
  AlignedBuffer<float> xp(static_cast<size_t>(std::max<int64_t>(1, std::min(a.m, panel_m) * cols)));
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    x86_fp4::pack_x_rows<kLanes>(a.x + mb * a.ldx, a.ldx, me - mb, cols, xp.data());
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t ne = std::min(n_end, nb + block_n);
      for (int64_t i0 = mb; i0 < me; i0 += kTileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kTileM, me - i0));
        strip_for_rows(mr, w, xp.data() + (i0 - mb) * cols, nb, ne, a.y + i0 * a.ldy, a.ldy, i0 == mb);
      }
    }
  }
}

// ---- GEMM over decoded panels (m >= kPanelMinRows; avx512_panel::panel_gemm) ----
// tile<> above decodes its W rows again for every 4 rows of x. The large GEMM instead decodes W rows once per
// x panel into f32, in the packed column order (32-column group g at [32g, 32g + 16) = its even columns, then
// its odd ones, the weights group() forms with the same table products): each y[i, n] is then the same FMAs
// on the same operands in the same order (ascending 16-column chunks, then hsum16) as tile<>, so m = 1..3 and
// the GEMM still agree bit for bit. From here on the panel GEMM is faster (matmul_cpu_bench --format fp4,
// 1024 x 2048, one thread, Zen 4: m = 8 66 vs 81 GFLOP/s, m = 12 86 vs 80, m = 384 102 vs 79); the choice
// never changes a bit.
constexpr int64_t kPanelMinRows = 12;

// dst[r * ldd + ...] = W row n0 + r decoded, packed (see above), for r < nr.
void decode_panel(const WeightMatrix& w, int64_t n0, int64_t nr, float* dst, int64_t ldd) {
  const int64_t cols = w.cols;
  const int64_t n_groups = cols / kGroupCols;
  const int64_t row_bytes = cols / 2;
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                      -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  alignas(64) float sc[kLanes];
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = static_cast<const uint8_t*>(w.data) + (n0 + r) * row_bytes;
    const uint8_t* sr = w.scales_e8m0 + (n0 + r) * n_groups;
    float* out = dst + r * ldd;
    for (int64_t g0 = 0; g0 < n_groups; g0 += kLanes) {
      const int64_t g1 = std::min<int64_t>(n_groups, g0 + kLanes);
      const __mmask16 m = static_cast<__mmask16>((1u << (g1 - g0)) - 1u);
      _mm512_store_ps(sc, e8m0_to_f32x16(_mm_maskz_loadu_epi8(m, sr + g0)));
      for (int64_t g = g0; g < g1; ++g) {
        const __m512 tab = _mm512_mul_ps(table, _mm512_set1_ps(sc[g - g0]));
        const __m512i codes =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + g * kGroupBytes)));
        _mm512_storeu_ps(out + g * kGroupCols, _mm512_permutexvar_ps(codes, tab));
        _mm512_storeu_ps(out + g * kGroupCols + kLanes,
                         _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), tab));
      }
    }
  }
}

}  // namespace

void matmul_cols_fp4_avx512(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  if (a.m <= 0 || n_begin >= n_end) return;
  const WeightMatrix& w = *a.w;
  const int64_t cols = w.cols;
  if (a.m <= 3) {
    // Decode: one strip, W streamed from DRAM once; 8 (m = 1) or 6 (m = 2, 3) W rows in flight.
    AlignedBuffer<float> xp(static_cast<size_t>(std::max<int64_t>(1, a.m * cols)));
    x86_fp4::pack_x_rows<kLanes>(a.x, a.ldx, a.m, cols, xp.data());
    if (a.m == 1) return row_strip<1, 8>(w, xp.data(), n_begin, n_end, a.y, a.ldy, true);
    if (a.m == 2) return row_strip<2, 6>(w, xp.data(), n_begin, n_end, a.y, a.ldy, true);
    return row_strip<3, 6>(w, xp.data(), n_begin, n_end, a.y, a.ldy, true);
  }
  if (a.m < kPanelMinRows) return tile_gemm(a, n_begin, n_end);
  // cols is a multiple of 32 (whole groups): no padding.
  avx512_panel::panel_gemm(
      a, n_begin, n_end, cols,
      [&](int64_t row0, int64_t n_rows, float* dst, int64_t ldp) {
        x86_fp4::pack_x_rows<kLanes>(a.x + row0 * a.ldx, a.ldx, n_rows, cols, dst, ldp);
      },
      [&](int64_t n0, int64_t nr, float* dst, int64_t ldp) { decode_panel(w, n0, nr, dst, ldp); });
}

}  // namespace ds
