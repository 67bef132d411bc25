#include "kernels/activation.h"

#include "kernels/ref/ops_ref.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace ds {

void silu_mul(Isa isa, const float* gate, const float* up, int64_t n, float* out, float limit) {
  switch (isa) {
    case Isa::avx512:
      return avx512::silu_mul(gate, up, n, out, limit);
    case Isa::avx2:
      return avx2::silu_mul(gate, up, n, out, limit);
    case Isa::reference:
      return ref::silu_mul(gate, up, n, out, limit);
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_add(float* y, float alpha, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float prod = alpha * x[i];
    y[i] += prod;
  }
}

}  // namespace ds
