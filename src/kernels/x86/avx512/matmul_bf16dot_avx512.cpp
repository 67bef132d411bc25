// vdpbf16ps tiles: y[i, n] = Σ_k bf16(x[i, k]) · bf16(W[n, k]), two columns per lane per instruction.
// bf16 weights are read in place; fp8 and fp4 weights are decoded (as the f32 paths decode them)
// and rounded to bf16 in chunks of 32 columns, in registers for small m, else into a panel of rows
// that the bf16 tiles then read (section "fp8 / fp4 weights" below). Every (i, n) runs the same instruction
// sequence whatever the tile, m, row position, panel or thread range (batch invariance): the tile shape only
// decides which loads are shared.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/x86/avx512/matmul_bf16dot_avx512.h"

#include <immintrin.h>

#include <algorithm>

#include "base/aligned_buffer.h"
#include "kernels/isa.h"
#include "kernels/matmul_bf16x.h"
#include "kernels/x86/avx512/fp8_decode_avx512.h"
#include "kernels/x86/avx512/matmul_avx512.h"
#include "kernels/x86/avx512/vec_avx512.h"
#include "tensor/dtype.h"

namespace ds {
namespace {

#define DS_INLINE inline __attribute__((always_inline))

constexpr int kPairLanes = 32;  // bf16 columns per vdpbf16ps

// x as bf16 rows of stride cols: the caller's (MatmulArgs::x_bf16) or rounded here.
struct Bf16Rows {
  AlignedBuffer<uint16_t> own;
  const uint16_t* rows = nullptr;
  explicit Bf16Rows(const MatmulArgs& a) {
    if (a.x_bf16 != nullptr) {
      rows = a.x_bf16;
      return;
    }
    own.resize(static_cast<size_t>(a.m * a.w->cols));
    round_rows_to_bf16_avx512(a.x, a.m, a.ldx, a.w->cols, own.data());
    rows = own.data();
  }
  const uint16_t* data() const { return rows; }
};

// One MR x NR tile over all chunks; xb rows are bf16 [m, cols] (row stride cols).
template <int MR, int NR>
void tile(const uint16_t* xb, int64_t cols, const uint16_t* w, int64_t n0, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const uint16_t* wr[NR];
  for (int j = 0; j < NR; ++j) wr[j] = w + (n0 + j) * cols;
  int64_t k = 0;
  for (; k + kPairLanes <= cols; k += kPairLanes) {
    __m512i wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[j] + k) + 1024, _MM_HINT_T0);
      wv[j] = _mm512_loadu_si512(wr[j] + k);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + i * cols + k));
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j)
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, reinterpret_cast<__m512bh>(wv[j]));
    }
  }
  if (k < cols) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (cols - k)) - 1u);
    __m512i wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_epi16(m, wr[j] + k);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, xb + i * cols + k));
      for (int j = 0; j < NR; ++j)
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, reinterpret_cast<__m512bh>(wv[j]));
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + n0 + j] = avx512::Vec16::reduce_add(acc[i][j]);
}

template <int MR, int NR>
void strip(const uint16_t* xb, int64_t cols, const uint16_t* w, int64_t n_begin, int64_t n_end, float* y,
           int64_t ldy) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) tile<MR, NR>(xb, cols, w, n, y, ldy);
  for (; n < n_end; ++n) tile<MR, 1>(xb, cols, w, n, y, ldy);
}

void strip_rows(int mr, const uint16_t* xb, int64_t cols, const uint16_t* w, int64_t n_begin, int64_t n_end,
                float* y, int64_t ldy) {
  switch (mr) {
    case 1:
      return strip<1, 4>(xb, cols, w, n_begin, n_end, y, ldy);
    case 2:
      return strip<2, 4>(xb, cols, w, n_begin, n_end, y, ldy);
    case 3:
      return strip<3, 4>(xb, cols, w, n_begin, n_end, y, ldy);
    case 4:
      return strip<4, 4>(xb, cols, w, n_begin, n_end, y, ldy);
    case 5:
      return strip<5, 4>(xb, cols, w, n_begin, n_end, y, ldy);
    default:
      return strip<6, 4>(xb, cols, w, n_begin, n_end, y, ldy);
  }
}

// Cache blocking as the f32 path: a panel of x rows (L3) against blocks of W rows (L2).
constexpr int kTileM = 6;

int64_t x_panel_rows(int64_t cols) {
  return std::max<int64_t>(kTileM, (int64_t{3} << 20) / std::max<int64_t>(1, cols * 2) / kTileM * kTileM);
}

// Rows [i_begin, i_end) of y against W rows [0, nr) of w (row stride cols), written at y + column 0.
void dot_rows(const uint16_t* xb, int64_t i_begin, int64_t i_end, int64_t cols, const uint16_t* w, int64_t nr,
              float* y, int64_t ldy) {
  if (i_end - i_begin == 1) return strip<1, 8>(xb + i_begin * cols, cols, w, 0, nr, y + i_begin * ldy, ldy);
  for (int64_t i0 = i_begin; i0 < i_end; i0 += kTileM) {
    const int mr = static_cast<int>(std::min<int64_t>(kTileM, i_end - i0));
    strip_rows(mr, xb + i0 * cols, cols, w, 0, nr, y + i0 * ldy, ldy);
  }
}

void run_dot(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t cols = a.w->cols;
  const Bf16Rows xb(a);
  const auto* w = static_cast<const uint16_t*>(a.w->data);
  if (a.m == 1) return strip<1, 8>(xb.data(), cols, w, n_begin, n_end, a.y, a.ldy);
  const int64_t block_n = std::max<int64_t>(4, (int64_t{384} << 10) / std::max<int64_t>(1, cols * 2) / 4 * 4);
  const int64_t panel_m = x_panel_rows(cols);
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t ne = std::min(n_end, nb + block_n);
      dot_rows(xb.data(), mb, me, cols, w + nb * cols, ne - nb, a.y + nb, a.ldy);
    }
  }
}

// ---- fp8 / fp4 weights: decoded to bf16 chunks of 32 columns ----
// A chunk is decoded to f32 exactly as the f32 paths decode it, then rounded to bf16 by
// vcvtne2ps2bf16 (nearest even, as f32_to_bf16 for every normal value; it flushes f32 subnormals to
// zero, which no real weight is), zero past cols. Small m runs tiles that decode each chunk in
// registers for every strip of x rows; larger m decodes every W row once into a bf16 panel that the
// bf16 tiles read. Both feed vdpbf16ps the same chunks in the same order, so the choice (by m) never
// changes a bit.

DS_INLINE __m512bh bf16x32(__m512 lo, __m512 hi) { return _mm512_cvtne2ps_pbh(hi, lo); }

// fp8 columns [k, k + 32) of a row at p = row + k with n_valid = cols - k of them left; the factors
// are the columns' block scales · 2^120 (s_lo for the first 16, s_hi for the second).
DS_INLINE __m512bh fp8_chunk(const uint8_t* p, int64_t n_valid, __m512 s_lo, __m512 s_hi) {
  if (n_valid >= 32)
    return bf16x32(_mm512_mul_ps(avx512_fp8::load(p), s_lo), _mm512_mul_ps(avx512_fp8::load(p + 16), s_hi));
  const __m512 lo = n_valid >= 16 ? avx512_fp8::load(p)
                                  : avx512_fp8::load_tail(p, static_cast<__mmask16>((1u << n_valid) - 1u));
  const __m512 hi = n_valid > 16
                        ? avx512_fp8::load_tail(p + 16, static_cast<__mmask16>((1u << (n_valid - 16)) - 1u))
                        : _mm512_setzero_ps();
  return bf16x32(_mm512_mul_ps(lo, s_lo), _mm512_mul_ps(hi, s_hi));
}

// fp4: group g = 16 code bytes and one E8M0 scale, 32 columns. Low nibbles are the even columns,
// high nibbles the odd ones; the table {±0, ±0.5, ..., ±6} · scale gives the reference's f32
// product e2m1 · 2^(e - 127), and two permutes interleave them into column order.
struct Fp4Chunks {
  __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                -2.0f, -3.0f, -4.0f, -6.0f);
  __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  DS_INLINE __m512bh operator()(const uint8_t* codes16, uint8_t scale) const {
    const __m512 tab = _mm512_mul_ps(table, _mm512_set1_ps(e8m0_to_f32(scale)));
    const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes16)));
    const __m512 even = _mm512_permutexvar_ps(c, tab);                       // columns 2l
    const __m512 odd = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), tab);  // columns 2l + 1
    return bf16x32(_mm512_permutex2var_ps(even, first, odd), _mm512_permutex2var_ps(even, second, odd));
  }
};

DS_INLINE void store_chunk(uint16_t* dst, __m512bh v, int64_t n_valid) {
  const __m512i bits = reinterpret_cast<__m512i>(v);
  if (n_valid >= 32) return _mm512_storeu_si512(dst, bits);
  _mm512_mask_storeu_epi16(dst, static_cast<__mmask32>((uint64_t{1} << n_valid) - 1u), bits);
}

// One chunk of an MR x NR register tile: x rows at xr (bf16, row stride cols), k the chunk's column.
template <int MR, int NR>
DS_INLINE void dot_chunk(__m512 (&acc)[MR][NR], const __m512bh (&wv)[NR], const uint16_t* xr, int64_t cols,
                         int64_t k) {
  const int64_t n_valid = cols - k;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512bh xv = reinterpret_cast<__m512bh>(
        n_valid >= 32 ? _mm512_loadu_si512(xr + i * cols + k)
                      : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << n_valid) - 1u),
                                                 xr + i * cols + k));
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
  }
}

template <int MR, int NR>
DS_INLINE void store_tile(const __m512 (&acc)[MR][NR], float* y, int64_t ldy, int64_t n0) {
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + n0 + j] = avx512::Vec16::reduce_add(acc[i][j]);
}

// The NR W rows of a register tile, decoded chunk by chunk. Rows<NR> gives block_cols (columns per
// scale; a multiple of 32), start_block(kb) (the block's factors) and chunk(j, k) (row j's columns
// [k, k + 32) as bf16).
template <int NR>
struct Fp8Rows {
  const uint8_t* wr[NR];
  const float* sr[NR];
  __m512 sv[NR];
  int64_t cols, block_cols;
  Fp8Rows(const WeightMatrix& w, int64_t n0) : cols(w.cols), block_cols(w.block_cols) {
    for (int j = 0; j < NR; ++j) {
      wr[j] = static_cast<const uint8_t*>(w.data) + (n0 + j) * cols;
      sr[j] = w.scales + ((n0 + j) / w.block_rows) * w.scale_cols();
    }
  }
  DS_INLINE void start_block(int64_t kb) {
    for (int j = 0; j < NR; ++j) sv[j] = _mm512_set1_ps(sr[j][kb] * avx512_fp8::kFold);
  }
  DS_INLINE __m512bh chunk(int j, int64_t k) const {
    _mm_prefetch(reinterpret_cast<const char*>(wr[j] + k) + 512, _MM_HINT_T0);
    return fp8_chunk(wr[j] + k, cols - k, sv[j], sv[j]);
  }
};

template <int NR>
struct Fp4Rows {
  const uint8_t* wr[NR];
  const uint8_t* sr[NR];
  const Fp4Chunks fp4;
  static constexpr int64_t block_cols = kPairLanes;  // one E8M0 scale per 32-column group
  Fp4Rows(const WeightMatrix& w, int64_t n0) {
    for (int j = 0; j < NR; ++j) {
      wr[j] = static_cast<const uint8_t*>(w.data) + (n0 + j) * (w.cols / 2);
      sr[j] = w.scales_e8m0 + (n0 + j) * w.scale_cols();
    }
  }
  DS_INLINE void start_block(int64_t /*kb*/) {}
  DS_INLINE __m512bh chunk(int j, int64_t k) const {
    const int64_t g = k / kPairLanes;
    if (g % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(wr[j] + g * 16) + 512, _MM_HINT_T0);
    return fp4(wr[j] + g * 16, sr[j][g]);
  }
};

// MR x NR tile with W decoded in registers: k-blocks outer (one factor per row), the block's chunks
// inner.
template <int MR, int NR, template <int> class Rows>
void reg_tile(const uint16_t* xb, const WeightMatrix& w, int64_t n0, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  Rows<NR> rows(w, n0);
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb * rows.block_cols < cols; ++kb) {
    rows.start_block(kb);
    const int64_t k_end = std::min(cols, (kb + 1) * rows.block_cols);
    for (int64_t k = kb * rows.block_cols; k < k_end; k += kPairLanes) {
      __m512bh wv[NR];
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) wv[j] = rows.chunk(j, k);
      dot_chunk<MR, NR>(acc, wv, xb, cols, k);
    }
  }
  store_tile<MR, NR>(acc, y, ldy, n0);
}

// The register tiles need whole chunks per scale: fp4 always (cols % 32 == 0), fp8 with
// block_cols % 32 == 0 (every real checkpoint).
bool decodes_in_registers(const WeightMatrix& w) {
  return w.format == WeightFormat::fp4_e2m1_block ||
         (w.format == WeightFormat::fp8_e4m3_block && w.block_cols % kPairLanes == 0);
}

template <int MR, int NR>
void reg_strip(const uint16_t* xb, const WeightMatrix& w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy) {
  const bool fp4 = w.format == WeightFormat::fp4_e2m1_block;
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR)
    fp4 ? reg_tile<MR, NR, Fp4Rows>(xb, w, n, y, ldy) : reg_tile<MR, NR, Fp8Rows>(xb, w, n, y, ldy);
  for (; n < n_end; ++n)
    fp4 ? reg_tile<MR, 1, Fp4Rows>(xb, w, n, y, ldy) : reg_tile<MR, 1, Fp8Rows>(xb, w, n, y, ldy);
}

// Up to kRegTileMaxM rows of x against W rows [n_begin, n_end), decoding W in registers.
constexpr int64_t kRegTileMaxM = 4;

void reg_rows(int64_t m, const uint16_t* xb, const WeightMatrix& w, int64_t n_begin, int64_t n_end, float* y,
              int64_t ldy) {
  switch (m) {
    case 1:
      return reg_strip<1, 8>(xb, w, n_begin, n_end, y, ldy);
    case 2:
      return reg_strip<2, 4>(xb, w, n_begin, n_end, y, ldy);
    case 3:
      return reg_strip<3, 4>(xb, w, n_begin, n_end, y, ldy);
    default:
      return reg_strip<4, 4>(xb, w, n_begin, n_end, y, ldy);
  }
}

// W rows [n0, n0 + nr) as bf16 into dst (row stride cols): the chunk decoders where the shape allows
// them (fp8 blocks of any multiple of 16 columns: the chunk's halves take their own block's factor),
// the reference decoder elsewhere (tiny test models' odd fp8 blocks).
void decode_panel(const WeightMatrix& w, int64_t n0, int64_t nr, uint16_t* dst) {
  const int64_t cols = w.cols;
  if (w.format == WeightFormat::fp4_e2m1_block) {
    const Fp4Chunks fp4;
    const int64_t n_groups = cols / kPairLanes;
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* codes = static_cast<const uint8_t*>(w.data) + (n0 + r) * (cols / 2);
      const uint8_t* scales = w.scales_e8m0 + (n0 + r) * n_groups;
      for (int64_t g = 0; g < n_groups; ++g)
        store_chunk(dst + r * cols + g * 32, fp4(codes + g * 16, scales[g]), 32);
    }
    return;
  }
  if (w.format != WeightFormat::fp8_e4m3_block || w.block_cols % 16 != 0)
    return decode_rows_to_bf16_ref(w, n0, nr, dst);
  const int64_t n_blocks = w.scale_cols();
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = static_cast<const uint8_t*>(w.data) + (n0 + r) * cols;
    const float* sr = w.scales + ((n0 + r) / w.block_rows) * n_blocks;
    if (w.block_cols % kPairLanes == 0) {  // every real checkpoint: one factor per k-block
      for (int64_t kb = 0; kb < n_blocks; ++kb) {
        const __m512 sv = _mm512_set1_ps(sr[kb] * avx512_fp8::kFold);
        const int64_t k_end = std::min(cols, (kb + 1) * w.block_cols);
        for (int64_t k = kb * w.block_cols; k < k_end; k += kPairLanes)
          store_chunk(dst + r * cols + k, fp8_chunk(wr + k, cols - k, sv, sv), cols - k);
      }
      continue;
    }
    for (int64_t k = 0; k < cols; k += kPairLanes) {
      const __m512 s_lo = _mm512_set1_ps(sr[k / w.block_cols] * avx512_fp8::kFold);
      const __m512 s_hi = _mm512_set1_ps(sr[std::min(k + 16, cols - 1) / w.block_cols] * avx512_fp8::kFold);
      store_chunk(dst + r * cols + k, fp8_chunk(wr + k, cols - k, s_lo, s_hi), cols - k);
    }
  }
}

void run_dot_decoded(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t cols = a.w->cols;
  const Bf16Rows xb(a);
  if (a.m <= kRegTileMaxM && decodes_in_registers(*a.w))
    return reg_rows(a.m, xb.data(), *a.w, n_begin, n_end, a.y, a.ldy);
  const int64_t panel_n = bf16_panel_rows(cols);
  const int64_t panel_m = x_panel_rows(cols);
  AlignedBuffer<uint16_t> wp(static_cast<size_t>(std::min(panel_n, n_end - n_begin) * cols));
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    for (int64_t nb = n_begin; nb < n_end; nb += panel_n) {
      const int64_t nr = std::min(panel_n, n_end - nb);
      decode_panel(*a.w, nb, nr, wp.data());
      dot_rows(xb.data(), mb, me, cols, wp.data(), nr, a.y + nb, a.ldy);
    }
  }
}

}  // namespace

// f32_to_bf16 bit for bit: nearest even by adding 0x7fff plus the kept lsb, NaN made quiet.
void round_rows_to_bf16_avx512(const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (int64_t i = 0; i < m; ++i) {
    const float* src = x + i * ldx;
    uint16_t* dst = out + i * cols;
    for (int64_t k = 0; k < cols; k += 16) {
      const __mmask16 mk =
          cols - k >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (cols - k)) - 1u);
      const __m512i b = _mm512_castps_si512(_mm512_maskz_loadu_ps(mk, src + k));
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs_mask), inf);
      const __m512i hi = _mm512_srli_epi32(b, 16);
      const __m512i rounded =
          _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, bias), _mm512_and_si512(hi, one)), 16);
      const __m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, quiet));
      _mm256_mask_storeu_epi16(dst + k, mk, _mm512_cvtepi32_epi16(r));
    }
  }
}

void matmul_cols_bf16dot_avx512(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  if (args.m <= 0 || n_begin >= n_end) return;
  if (!cpu_has_avx512_bf16()) return matmul_cols_with_bf16_x(matmul_cols_avx512, args, n_begin, n_end);
  if (args.w->format == WeightFormat::bf16) return run_dot(args, n_begin, n_end);
  run_dot_decoded(args, n_begin, n_end);
}

}  // namespace ds
