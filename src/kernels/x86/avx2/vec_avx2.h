// The AVX2 vector-lane traits (8 f32 lanes) that the x86 kernel templates are written over
// (x86/attention_impl.h, x86/v4_attention_impl.h): one definition for every AVX2 kernel, so the
// lane count, masks and the fixed reduction tree cannot drift between families.
// Include only from files compiled with AVX2 flags (x86/avx2/).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/avx2/exp_avx2.h"

namespace ds::avx2 {

struct Vec8 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static Mask mask(int64_t remaining) {
    const int r = remaining >= 8 ? 8 : static_cast<int>(remaining);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static V load_masked_fill(const float* p, Mask m, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_masked(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  // max(x, m) as the references' `x > m ? x : m` (NaN in x is skipped, as there).
  static V max_nan(V x, V m) { return _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ)); }
  static V exp(V x) { return exp_ps(x); }
  // A fixed halving tree, the same for every call: (l + l+4), (l + l+2), (l + l+1).
  static float reduce_add(V v) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
  static float reduce_max(V v) {
    const __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_max_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_max_ss(c, _mm_movehdup_ps(c)));
  }
};

}  // namespace ds::avx2
