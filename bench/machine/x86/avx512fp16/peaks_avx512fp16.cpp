// AVX512-FP16 fp16 FMA peak loop. Built with -mavx512fp16 only when the compiler accepts it
// (DS_BENCH_HAVE_AVX512FP16); otherwise a stub. Called only when CPUID reports AVX512-FP16.
#include "machine/peak_loops.h"

#if defined(DS_BENCH_HAVE_AVX512FP16)
#include <immintrin.h>

#include "tensor/dtype.h"
#endif

namespace ds::bench::loops {

#if defined(DS_BENCH_HAVE_AVX512FP16)
double fma_f16_avx512fp16(int64_t n_iters, uint16_t a_f16, uint16_t b_f16) {
  const __m512h va = _mm512_castsi512_ph(_mm512_set1_epi16(static_cast<short>(a_f16)));
  const __m512h vb = _mm512_castsi512_ph(_mm512_set1_epi16(static_cast<short>(b_f16)));
  __m512h acc[kPeakAccumulators];
#pragma GCC unroll 16
  for (int k = 0; k < kPeakAccumulators; ++k) acc[k] = _mm512_set1_ph(static_cast<_Float16>(k));
  for (int64_t i = 0; i < n_iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kPeakAccumulators; ++k) acc[k] = _mm512_fmadd_ph(acc[k], va, vb);
  }
  double total = 0;
  alignas(64) uint16_t lanes[32];
  for (int k = 0; k < kPeakAccumulators; ++k) {
    _mm512_store_si512(lanes, _mm512_castph_si512(acc[k]));
    for (uint16_t v : lanes) total += f16_to_f32(v);
  }
  return total;
}
bool avx512fp16_loop_compiled() { return true; }
#else
double fma_f16_avx512fp16(int64_t /*n_iters*/, uint16_t /*a_f16*/, uint16_t /*b_f16*/) { return 0; }
bool avx512fp16_loop_compiled() { return false; }
#endif

}  // namespace ds::bench::loops
