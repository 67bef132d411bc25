#include "kernels/norm.h"

#include "kernels/ref/ops_ref.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace ds {

void rmsnorm(Isa isa, const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps,
             float* y, int64_t ldy) {
  switch (isa) {
    case Isa::avx512:
      return avx512::rmsnorm(x, n_rows, dim, ldx, w, eps, y, ldy);
    case Isa::avx2:
      return avx2::rmsnorm(x, n_rows, dim, ldx, w, eps, y, ldy);
    case Isa::reference:
      return ref::rmsnorm(x, n_rows, dim, ldx, w, eps, y, ldy);
  }
}

}  // namespace ds
