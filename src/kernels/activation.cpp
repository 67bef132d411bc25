#include "kernels/activation.h"

#include "kernels/kernel_table.h"

namespace ds {

void silu_mul(Isa isa, const float* gate, const float* up, int64_t n, float* out, float limit) {
  kernel_table(isa).silu_mul(gate, up, n, out, limit);
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
