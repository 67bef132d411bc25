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

// V4's RMSNorm (the f64 form, one rounding per output: to bf16 when to_bf16, else to f32; exact
// semantics in kernels/ref/ops_ref.h). Every Isa gives the same bits. x, y: [n_rows, dim]
// contiguous, not aliased; w: [dim].
void rmsnorm_f64(Isa isa, const float* x, int64_t n_rows, int64_t dim, const float* w, double eps,
                 bool to_bf16, float* y);

}  // namespace ds
