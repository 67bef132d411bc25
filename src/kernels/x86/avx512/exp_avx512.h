// e^x on 16 f32 lanes, shared by the AVX-512 row and attention kernels. Include only from files
// compiled with AVX-512 flags (x86/avx512/).
//
// Cody-Waite reduction x = n·ln2 + r with |r| ≤ ln2/2, Cephes expf's polynomial for e^r, then an
// exact scaling by 2^n (vscalefps rounds once, so subnormal results are correctly rounded from
// e^r). The input is clamped to [−104, 89] first: below −104 e^x rounds to 0, above 89 it
// overflows to +inf through the scaling. min/max take NaN from their second operand, which keeps
// NaN inputs NaN. Error ≤ 1 ulp against the correctly rounded e^x over a dense sweep of the
// whole range (ops_test measures it and asserts ≤ 2).
#pragma once

#include <immintrin.h>

namespace ds::avx512 {

inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace ds::avx512
