#include "kernels/hadamard.h"

#include <cmath>

#include "base/assert.h"
#include "kernels/kernel_table.h"

namespace ds {

float hadamard_default_scale(int64_t n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
}

void hadamard_rows(Isa isa, float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  DS_ASSERT(n > 0 && (n & (n - 1)) == 0, "hadamard_rows: n must be a power of two");
  kernel_table(isa).hadamard_rows(x, n_rows, n, ld, scale);
}

}  // namespace ds
