#include "kernels/hadamard.h"

#include <cmath>

#include "base/assert.h"
#include "kernels/ref/v4_rows_ref.h"
#include "kernels/x86/avx2/v4_rows_avx2.h"
#include "kernels/x86/avx512/v4_rows_avx512.h"

namespace ds {

float hadamard_default_scale(int64_t n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
}

void hadamard_rows(Isa isa, float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  DS_ASSERT(n > 0 && (n & (n - 1)) == 0, "hadamard_rows: n must be a power of two");
  switch (isa) {
    case Isa::avx512:
      if (n >= 16) return avx512::hadamard_rows(x, n_rows, n, ld, scale);
      break;
    case Isa::avx2:
      if (n >= 8) return avx2::hadamard_rows(x, n_rows, n, ld, scale);
      break;
    case Isa::reference:
      break;
  }
  ref::hadamard_rows(x, n_rows, n, ld, scale);
}

}  // namespace ds
