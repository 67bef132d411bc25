// Baseline x86-64 memory loops: the fallback on CPUs without AVX2, and the untuned reference
// the vector loops are compared with in the same run.
#include "machine/peak_loops.h"

namespace ds::bench::loops {

double read_sum_baseline(const float* p, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  double total = static_cast<double>(s0) + s1 + s2 + s3;
  for (; i < n; ++i) total += p[i];
  return total;
}

void copy_baseline(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

void triad_baseline(float* a, const float* b, const float* c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace ds::bench::loops
