// SwiGLU gate: out = silu(gate) * up, elementwise, f32. Optional clamp (V4's swiglu_limit):
// with limit > 0, gate = min(gate, limit) and up = clamp(up, -limit, limit) first.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

void silu_mul(Isa isa, const float* gate, const float* up, int64_t n, float* out, float limit = 0.0f);

// Residual-stream helpers (memory-bound; plain loops that the compiler vectorises). Each output
// element is one f32 operation (scale_add: a product then a sum, never fused), so the result
// does not depend on the Isa or the vector width.
void add_inplace(float* y, const float* x, int64_t n);             // y += x
void scale_add(float* y, float alpha, const float* x, int64_t n);  // y += alpha·x

}  // namespace ds
