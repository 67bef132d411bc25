// AVX-512 peak loops (compiled with DS_AVX512_FLAGS; called only when CPUID reports AVX-512,
// and the bf16/VNNI loops only when those extensions are present too).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() (self-initialised on purpose) as the
// pass-through operand, which -Wmaybe-uninitialized flags once inlined; the header is correct.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "machine/peak_loops.h"

namespace ds::bench::loops {
namespace {

constexpr int kAcc = kPeakAccumulators;

double sum_lanes(const __m512* acc) {
  double total = 0;
  alignas(64) float lanes[16];
  for (int k = 0; k < kAcc; ++k) {
    _mm512_store_ps(lanes, acc[k]);
    for (float v : lanes) total += v;
  }
  return total;
}

}  // namespace

double fma_f32_avx512(int64_t n_iters, float a, float b) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  __m512 acc[kAcc];
#pragma GCC unroll 16
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_fmadd_ps(acc[k], va, vb);
  }
  return sum_lanes(acc);
}

double dot_bf16_avx512(int64_t n_iters, uint16_t a_bf16, uint16_t b_bf16) {
  const __m512bh va = (__m512bh)_mm512_set1_epi16(static_cast<short>(a_bf16));
  const __m512bh vb = (__m512bh)_mm512_set1_epi16(static_cast<short>(b_bf16));
  __m512 acc[kAcc];
#pragma GCC unroll 16
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], va, vb);
  }
  return sum_lanes(acc);
}

int64_t dot_u8s8_avx512(int64_t n_iters, uint8_t a, int8_t b) {
  const __m512i va = _mm512_set1_epi8(static_cast<char>(a));
  const __m512i vb = _mm512_set1_epi8(static_cast<char>(b));
  __m512i acc[kAcc];
#pragma GCC unroll 16
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_set1_epi32(k);
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], va, vb);
  }
  int64_t total = 0;
  alignas(64) int32_t lanes[16];
  for (int k = 0; k < kAcc; ++k) {
    _mm512_store_si512(lanes, acc[k]);
    for (int32_t v : lanes) total += v;
  }
  return total;
}

double f16c_fma_avx512(int64_t n_iters, const uint16_t* w_f16, float x) {
  const __m512 vx = _mm512_set1_ps(x);
  __m512 acc[kAcc];
#pragma GCC unroll 16
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_f16 + 16 * k));
      acc[k] = _mm512_fmadd_ps(_mm512_cvtph_ps(h), vx, acc[k]);
    }
  }
  return sum_lanes(acc);
}

double bf16_widen_fma_avx512(int64_t n_iters, const uint16_t* w_bf16, float x) {
  const __m512 vx = _mm512_set1_ps(x);
  __m512 acc[kAcc];
#pragma GCC unroll 16
  for (int k = 0; k < kAcc; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAcc; ++k) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_bf16 + 16 * k));
      const __m512 w = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      acc[k] = _mm512_fmadd_ps(w, vx, acc[k]);
    }
  }
  return sum_lanes(acc);
}

double read_sum_avx512(const float* p, int64_t n) {
  // Four independent add chains, 256 bytes per iteration: enough loads in flight for DRAM.
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + i + 48));
  }
  // Reduced through memory: GCC 12's _mm512_reduce_add_ps trips -Werror=uninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  double total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}

void copy_avx512(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
    _mm512_storeu_ps(dst + i + 16, _mm512_loadu_ps(src + i + 16));
    _mm512_storeu_ps(dst + i + 32, _mm512_loadu_ps(src + i + 32));
    _mm512_storeu_ps(dst + i + 48, _mm512_loadu_ps(src + i + 48));
  }
  for (; i < n; ++i) dst[i] = src[i];
}

void triad_avx512(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
    _mm512_storeu_ps(a + i + 16,
                     _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i + 16), _mm512_loadu_ps(b + i + 16)));
  }
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace ds::bench::loops
