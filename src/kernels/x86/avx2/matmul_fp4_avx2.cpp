// AVX2 FP4 matmul. Per 16-column chunk c of W row n: its 8 bytes widen to 8 lanes; vpermps looks
// the magnitude (low 3 bits of a nibble; the high nibble after a 4-bit shift) up in the 8-entry
// table {0, 0.5, ..., 6} · scale(n, c/2), and the nibble's bit 3 is xor-ed in as the f32 sign.
// -(|v| · s) is bit-identical to the reference's (−|v|) · s, so each decoded weight equals
// weight_at_ref. Lane l then does acc = fma(x[16c + 2l], w_lo, acc); acc = fma(x[16c + 2l + 1],
// w_hi, acc), then hsum8 (the same tree as the other formats). Every tile shape runs these
// operations per (i, n): batch invariant.
#include "kernels/x86/avx2/matmul_fp4_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/aligned_buffer.h"
#include "kernels/x86/fp4_pack.h"

namespace ds {
namespace {

#define DS_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 8;
constexpr int64_t kGroupCols = 32;  // columns per E8M0 scale
constexpr int64_t kChunkBytes = 8;  // one 16-column chunk of codes

DS_INLINE float hsum8(__m256 v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
  return _mm_cvtss_f32(d);
}

// 8 E8M0 bytes -> f32 exactly as e8m0_to_f32: b << 23, except 0 (2^-127, a subnormal) and 255 (NaN).
DS_INLINE __m256 e8m0_to_f32x8(const uint8_t* p, int64_t n) {
  alignas(8) uint8_t bytes[8] = {};
  std::memcpy(bytes, p, static_cast<size_t>(n));
  int64_t packed;
  std::memcpy(&packed, bytes, sizeof(packed));
  const __m256i b = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(packed));
  __m256i bits = _mm256_slli_epi32(b, 23);
  bits =
      _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
  bits =
      _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(b, _mm256_set1_epi32(0xff)));
  return _mm256_castsi256_ps(bits);
}

DS_INLINE __m256i load_codes(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
}

template <int MR, int NR>
void tile(const WeightMatrix& w, const float* xp, int64_t n0, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  const int64_t n_groups = cols / kGroupCols;
  const int64_t row_bytes = cols / 2;
  const uint8_t* wr[NR];
  const uint8_t* sr[NR];
  for (int j = 0; j < NR; ++j) {
    wr[j] = static_cast<const uint8_t*>(w.data) + (n0 + j) * row_bytes;
    sr[j] = w.scales_e8m0 + (n0 + j) * n_groups;
  }
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();

  // Scales are decoded 8 groups (256 columns) at a time into sc.
  alignas(32) float sc[NR][kLanes];
  for (int64_t g = 0; g < n_groups; ++g) {
    if (g % kLanes == 0) {
      const int64_t n = std::min<int64_t>(kLanes, n_groups - g);
      for (int j = 0; j < NR; ++j) _mm256_store_ps(sc[j], e8m0_to_f32x8(sr[j] + g, n));
    }
    __m256 tab[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) tab[j] = _mm256_mul_ps(magnitudes, _mm256_set1_ps(sc[j][g % kLanes]));
#pragma GCC unroll 2
    for (int64_t c = 2 * g; c < 2 * g + 2; ++c) {  // the group's two 16-column chunks
      __m256i codes[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) codes[j] = load_codes(wr[j] + c * kChunkBytes);
        // Low nibbles (even columns) for every accumulator, then the high ones: each x chunk is
        // loaded once per tile and each accumulator still sees column 2l before 2l + 1.
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        __m256 wv[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
          const __m256i idx = half == 0 ? codes[j] : _mm256_srli_epi32(codes[j], 4);
          const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(idx, 28), sign_bit);
          wv[j] = _mm256_xor_ps(_mm256_permutevar8x32_ps(tab[j], idx), _mm256_castsi256_ps(sign));
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          const __m256 xv = _mm256_loadu_ps(xp + i * cols + c * 2 * kLanes + half * kLanes);
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + n0 + j] = hsum8(acc[i][j]);
}

template <int MR, int NR>
void row_strip(const WeightMatrix& w, const float* xp, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) tile<MR, NR>(w, xp, n, y, ldy);
  for (; n < n_end; ++n) tile<MR, 1>(w, xp, n, y, ldy);
}

constexpr int kTileM = 3;
constexpr int kTileN = 4;

}  // namespace

void matmul_cols_fp4_avx2(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  if (a.m <= 0 || n_begin >= n_end) return;
  const WeightMatrix& w = *a.w;
  const int64_t cols = w.cols;
  // Panels of packed x rows (~2 MiB) against blocks of W rows (~256 KiB of codes, L2).
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
        const float* x = xp.data() + (i0 - mb) * cols;
        float* y = a.y + i0 * a.ldy;
        switch (std::min<int64_t>(kTileM, me - i0)) {
          case 1:
            row_strip<1, kTileN>(w, x, nb, ne, y, a.ldy);
            break;
          case 2:
            row_strip<2, kTileN>(w, x, nb, ne, y, a.ldy);
            break;
          default:
            row_strip<3, kTileN>(w, x, nb, ne, y, a.ldy);
            break;
        }
      }
    }
  }
}

}  // namespace ds
