// RMSNorm: y = w ⊙ x · (mean(x²) + eps)^-½, computed in f32. In-place (y == x) is allowed.
// Every path sums x² in f64 (exact squares), so paths agree to ~1 ulp whatever their lane order;
// then r = (float)(mean + eps)^-½ and y = (x·r)·w in f32.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

// x, y: [n_rows, dim] with row strides ldx / ldy; w: [dim] (nullptr = no weight, i.e. w = 1).
void rmsnorm(Isa isa, const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps,
             float* y, int64_t ldy);

}  // namespace ds
