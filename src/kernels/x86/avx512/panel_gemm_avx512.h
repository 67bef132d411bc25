// The f32 GEMM over decoded W panels that the quantised AVX-512 formats (fp8, fp4) share for
// larger m. Their register tiles decode W again for every few rows of x; here each W row is
// decoded once per x panel into f32 (in whatever lane order the format's tiles use), and plain
// f32 tiles run over it. A format keeps its results bit for bit when the decoded f32 weight of
// lane l of chunk c is exactly the value its own tile multiplies x by, x is packed in the same
// lane order, and every chunk of 16 columns is accumulated in ascending order with one fma per
// lane, then hsum16 (the fixed tree of Vec16::reduce_add). Zero padding of both x and W past cols
// stands in for the tiles' zero-masked last chunk: the same fma on the same zeros.
// Include only from files compiled with AVX-512 flags (x86/avx512/).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "base/aligned_buffer.h"
#include "kernels/matmul.h"
#include "kernels/x86/avx512/vec_avx512.h"

namespace ds::avx512_panel {

constexpr int kLanes = 16;
constexpr int kPanelN = 16;     // W rows per decoded panel (16 · cols · 4 bytes; 128 KiB at 2048)
constexpr int kPanelTileM = 6;  // 6 x 4 accumulators + 4 weights + 1 x row in 32 zmm
constexpr int kPanelTileN = 4;

// y[i * ldy + j] for i < MR, j < NR: x rows xp against decoded rows wp (both stride ldp, 64-byte
// aligned, chunk_cols a multiple of 16).
template <int MR, int NR>
inline void panel_tile(const float* xp, const float* wp, int64_t chunk_cols, int64_t ldp, float* y,
                       int64_t ldy) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunk_cols; c += kLanes) {
    __m512 wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_load_ps(wp + j * ldp + c);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_load_ps(xp + i * ldp + c);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = avx512::Vec16::reduce_add(acc[i][j]);
}

// MR x rows against the nr decoded rows of a panel: y[i * ldy + j] for j < nr.
template <int MR>
inline void panel_strip(const float* xp, const float* wp, int64_t nr, int64_t chunk_cols, int64_t ldp,
                        float* y, int64_t ldy) {
  int64_t j = 0;
  for (; j + kPanelTileN <= nr; j += kPanelTileN) {
    panel_tile<MR, kPanelTileN>(xp, wp + j * ldp, chunk_cols, ldp, y + j, ldy);
  }
  for (; j < nr; ++j) panel_tile<MR, 1>(xp, wp + j * ldp, chunk_cols, ldp, y + j, ldy);
}

inline void panel_strip_for_rows(int mr, const float* xp, const float* wp, int64_t nr, int64_t chunk_cols,
                                 int64_t ldp, float* y, int64_t ldy) {
  switch (mr) {
    case 1:
      return panel_strip<1>(xp, wp, nr, chunk_cols, ldp, y, ldy);
    case 2:
      return panel_strip<2>(xp, wp, nr, chunk_cols, ldp, y, ldy);
    case 3:
      return panel_strip<3>(xp, wp, nr, chunk_cols, ldp, y, ldy);
    case 4:
      return panel_strip<4>(xp, wp, nr, chunk_cols, ldp, y, ldy);
    case 5:
      return panel_strip<5>(xp, wp, nr, chunk_cols, ldp, y, ldy);
    default:
      return panel_strip<6>(xp, wp, nr, chunk_cols, ldp, y, ldy);
  }
}

// y[i, n] for i < a.m, n in [n_begin, n_end) over chunk_cols = cols rounded up to 16.
//   pack_x(row0, n_rows, dst, ldp): x rows [row0, row0 + n_rows) into dst, zero past cols;
//   decode_w(n0, nr, dst, ldp): W rows [n0, n0 + nr) as f32 into dst, zero past cols.
// x panels of ~512 KiB (L2, beside the decoded W panel); row stride chunk_cols + 16 floats, since
// rows 2^k floats apart would map a tile's 10 row streams onto the same L1 sets.
template <class PackX, class DecodeW>
void panel_gemm(const MatmulArgs& a, int64_t n_begin, int64_t n_end, int64_t chunk_cols, PackX&& pack_x,
                DecodeW&& decode_w) {
  const int64_t ldp = chunk_cols + kLanes;
  const int64_t panel_m =
      std::max<int64_t>(kPanelTileM, (int64_t{512} << 10) / (ldp * 4) / kPanelTileM * kPanelTileM);
  AlignedBuffer<float> xp(static_cast<size_t>(std::min(a.m, panel_m) * ldp));
  AlignedBuffer<float> wp(static_cast<size_t>(kPanelN * ldp));
  for (int64_t mb = 0; mb < a.m; mb += panel_m) {
    const int64_t me = std::min(a.m, mb + panel_m);
    pack_x(mb, me - mb, xp.data(), ldp);
    for (int64_t nb = n_begin; nb < n_end; nb += kPanelN) {
      const int64_t nr = std::min<int64_t>(kPanelN, n_end - nb);
      decode_w(nb, nr, wp.data(), ldp);
      for (int64_t i0 = mb; i0 < me; i0 += kPanelTileM) {
        const int mr = static_cast<int>(std::min<int64_t>(kPanelTileM, me - i0));
        panel_strip_for_rows(mr, xp.data() + (i0 - mb) * ldp, wp.data(), nr, chunk_cols, ldp,
                             a.y + i0 * a.ldy + nb, a.ldy);
      }
    }
  }
}

}  // namespace ds::avx512_panel
