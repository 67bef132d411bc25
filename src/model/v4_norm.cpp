#include "model/v4_norm.h"

#include <cmath>

namespace ds {

void v4_rmsnorm(const V4Numerics& num, Bf16Point point, const float* x, int64_t n_rows, int64_t dim,
                const float* w, double eps, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = num.round(point, static_cast<double>(w[i]) * (xr[i] * inv_rms));
  }
}

}  // namespace ds
