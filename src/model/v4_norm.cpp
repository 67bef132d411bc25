#include "model/v4_norm.h"

#include "kernels/norm.h"

namespace ds {

void v4_rmsnorm(Isa isa, const V4Numerics& num, Bf16Point point, const float* x, int64_t n_rows, int64_t dim,
                const float* w, double eps, float* y) {
  rmsnorm_f64(isa, x, n_rows, dim, w, eps, num.rounds(point), y);
}

}  // namespace ds
