// The AVX-512 vector-lane traits (16 f32 lanes) that the x86 kernel templates are written over
// (x86/attention_impl.h, x86/v4_attention_impl.h): one definition for every AVX-512 kernel, so
// the lane count, masks and the fixed reduction tree cannot drift between families.
// Include only from files compiled with AVX-512 flags (x86/avx512/).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/avx512/exp_avx512.h"

namespace ds::avx512 {

struct Vec16 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static Mask mask(int64_t remaining) {
    return remaining >= 16 ? static_cast<Mask>(0xFFFF) : static_cast<Mask>((1u << remaining) - 1u);
  }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static V load_masked_fill(const float* p, Mask m, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_masked(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  // max(x, m) as the references' `x > m ? x : m` (NaN in x is skipped, as there).
  static V max_nan(V x, V m) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, m, _CMP_GT_OQ), m, x); }
  static V exp(V x) { return exp_ps(x); }
  // A fixed halving tree, the same for every call: (l + l+8), (l + l+4), (l + l+2), (l + l+1).
  static float reduce_add(V v) {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  static float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
};

}  // namespace ds::avx512
