// FP8 E4M3 decoding in AVX-512 registers, shared by the f32 fp8 tiles and panels
// (matmul_avx512.cpp) and the bf16-activation path's decoded panels (matmul_bf16dot_avx512.cpp).
// Include only from files compiled with AVX-512 flags (x86/avx512/).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "tensor/weight_matrix.h"

namespace ds::avx512_fp8 {

#define DS_FP8_INLINE inline __attribute__((always_inline))

constexpr int kLanes = 16;

// Sign-extend each byte to 32 bits and shift left by 20: exponent+mantissa land in bits 20..26
// (an f32 whose exponent field is the fp8 exponent), the sign in bit 31; the mask clears the
// sign copies in bits 27..30. The f32 equals fp8 · 2^-120 exactly, subnormals included, so
// multiplying by (scale · 2^120) gives the reference's fp8 · scale rounded once.
// Codes 0x7f/0xff are not special: they decode as ±480 (not NaN). Needs MXCSR.DAZ off.
DS_FP8_INLINE __m512 widen(__m128i b) {
  const __m512i v = _mm512_slli_epi32(_mm512_cvtepi8_epi32(b), 20);
  return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0x87f00000u))));
}
DS_FP8_INLINE __m512 load(const uint8_t* p) {
  return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
DS_FP8_INLINE __m512 load_tail(const uint8_t* p, __mmask16 m) { return widen(_mm_maskz_loadu_epi8(m, p)); }

constexpr float kFold = 0x1p120f;  // undoes the 2^-120 of widen

// dst[r * ldd + k] = W row n0 + r decoded to f32 (fp8 · scale rounded once, as the reference), zero
// for cols <= k < cols rounded up to 16, for r < nr. Precondition: w.block_cols % 16 == 0 (a chunk
// of 16 columns never straddles a k-block) and dst 64-byte aligned with ldd a multiple of 16.
inline void decode_rows_f32(const WeightMatrix& w, int64_t n0, int64_t nr, float* dst, int64_t ldd) {
  const int64_t cols = w.cols;
  const int64_t n_blocks = w.scale_cols();
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = static_cast<const uint8_t*>(w.data) + (n0 + r) * cols;
    const float* srow = w.scales + ((n0 + r) / w.block_rows) * n_blocks;
    float* out = dst + r * ldd;
    for (int64_t kb = 0; kb < n_blocks; ++kb) {
      const __m512 sv = _mm512_set1_ps(srow[kb] * kFold);
      const int64_t k_end = std::min(cols, (kb + 1) * w.block_cols);
      for (int64_t k = kb * w.block_cols; k < k_end; k += kLanes) {
        const __m512 wv = k + kLanes <= cols
                              ? load(wr + k)
                              : load_tail(wr + k, static_cast<__mmask16>((1u << (cols - k)) - 1u));
        _mm512_store_ps(out + k, _mm512_mul_ps(wv, sv));
      }
    }
  }
}

#undef DS_FP8_INLINE

}  // namespace ds::avx512_fp8
