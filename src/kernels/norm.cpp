#include "kernels/norm.h"

#include "kernels/kernel_table.h"

namespace ds {

void rmsnorm(Isa isa, const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps,
             float* y, int64_t ldy) {
  kernel_table(isa).rmsnorm(x, n_rows, dim, ldx, w, eps, y, ldy);
}

void rmsnorm_f64(Isa isa, const float* x, int64_t n_rows, int64_t dim, const float* w, double eps,
                 bool to_bf16, float* y) {
  if (n_rows <= 0 || dim <= 0) return;
  kernel_table(isa).rmsnorm_f64(x, n_rows, dim, w, eps, to_bf16, y);
}

}  // namespace ds
