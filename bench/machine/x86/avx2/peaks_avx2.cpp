// AVX2 + FMA + F16C peak loops (compiled with DS_AVX2_FLAGS; called only when CPUID reports them).
#include <immintrin.h>

#include "machine/peak_loops.h"

namespace ds::bench::loops {
namespace {

constexpr int kAcc = kPeakAccumulatorsYmm;

double sum_lanes(const __m256* acc) {
  double total = 0;
  alignas(32) float lanes[8];
  for (int k = 0; k < kAcc; ++k) {
    _mm256_store_ps(lanes, acc[k]);
    for (float v : lanes) total += v;
  }
  return total;
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

double fma_f32_avx2(int64_t n_iters, float a, float b) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  __m256 acc[kAcc];
#pragma GCC unroll 12
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_fmadd_ps(acc[k], va, vb);
  }
  return sum_lanes(acc);
}

double f16c_fma_avx2(int64_t n_iters, const uint16_t* w_f16, float x) {
  const __m256 vx = _mm256_set1_ps(x);
  __m256 acc[kAcc];
#pragma GCC unroll 12
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAcc; ++k) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w_f16 + 8 * k));
      acc[k] = _mm256_fmadd_ps(_mm256_cvtph_ps(h), vx, acc[k]);
    }
  }
  return sum_lanes(acc);
}

double read_sum_avx2(const float* p, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  double total = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) total += p[i];
  return total;
}

void copy_avx2(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
    _mm256_storeu_ps(dst + i + 8, _mm256_loadu_ps(src + i + 8));
    _mm256_storeu_ps(dst + i + 16, _mm256_loadu_ps(src + i + 16));
    _mm256_storeu_ps(dst + i + 24, _mm256_loadu_ps(src + i + 24));
  }
  for (; i < n; ++i) dst[i] = src[i];
}

void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    _mm256_storeu_ps(a + i + 8, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace ds::bench::loops
