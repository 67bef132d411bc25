// vdpbf16ps tiles: y[i, n] = Σ_k bf16(x[i, k]) · W[n, k], two columns per lane per instruction.
// Every (i, n) runs the same instruction sequence whatever the tile, m, row position or thread
// range (batch invariance): the tile shape only decides which loads are shared.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/x86/avx512/matmul_bf16dot_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matmul_bf16x.h"
#include "kernels/x86/avx512/matmul_avx512.h"
#include "kernels/x86/avx512/vec_avx512.h"

namespace ds {
namespace {

constexpr int kPairLanes = 32;  // bf16 columns per vdpbf16ps

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

void run_dot(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t cols = a.w->cols;
  const std::vector<uint16_t> xb = round_rows_to_bf16(a);
  const auto* w = static_cast<const uint16_t*>(a.w->data);
  if (a.m == 1) return strip<1, 8>(xb.data(), cols, w, n_begin, n_end, a.y, a.ldy);
  // Cache blocking as the f32 path: a panel of x rows (L3) against blocks of W rows (L2).
  constexpr int kTileM = 6;
  const int64_t block_n = std::max<int64_t>(4, (int64_t{384} << 10) / std::max<int64_t>(1, cols * 2) / 4 * 4);
  const int64_t panel_m =
      std::max<int64_t>(kTileM, (int64_t{3} << 20) / std::max<int64_t>(1, cols * 2) / kTileM * kTileM);
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    for (int64_t nb = n_begin; nb < n_end; nb += block_n) {
      const int64_t ne = std::min(n_end, nb + block_n);
      for (int64_t i0 = mb; i0 < me; i0 += kTileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kTileM, me - i0));
        strip_rows(mr, xb.data() + i0 * cols, cols, w, nb, ne, a.y + i0 * a.ldy, a.ldy);
      }
    }
  }
}

}  // namespace

void matmul_cols_bf16dot_avx512(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  if (args.m <= 0 || n_begin >= n_end) return;
  if (!cpu_has_avx512_bf16()) return matmul_cols_with_bf16_x(matmul_cols_avx512, args, n_begin, n_end);
  run_dot(args, n_begin, n_end);
}

}  // namespace ds
