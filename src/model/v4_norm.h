// V4's RMSNorm at a bf16 rounding point: y = w·x·(mean(x²)+eps)^-½ in double, rounded once (to
// bf16 when the point is on, else to f32), as the reference does; kernels/norm.h's rmsnorm_f64 on
// the context's Isa (every path gives the reference's bits). The f32 kernel (kernels/norm.h)
// rounds three times (1/rms, x·(1/rms), ·w), a coherent error of ~1 f32 ulp on every element
// that lands on the other side of a bf16 rounding often enough to matter downstream
// (docs/numerics.md "V4 ablation"); a norm is O(rows·dim), nothing next to the GEMM it feeds.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "model/v4_numerics.h"

namespace ds {

// x, y: [n_rows, dim] (contiguous; may not alias); w: [dim].
void v4_rmsnorm(Isa isa, const V4Numerics& num, Bf16Point point, const float* x, int64_t n_rows, int64_t dim,
                const float* w, double eps, float* y);

}  // namespace ds
