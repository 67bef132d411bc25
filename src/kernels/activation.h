// SwiGLU gate: out = silu(gate) * up, elementwise, f32. Optional clamp (V4's swiglu_limit):
// with limit > 0, gate = min(gate, limit) and up = clamp(up, -limit, limit) first.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

void silu_mul(Isa isa, const float* gate, const float* up, int64_t n, float* out, float limit = 0.0f);

}  // namespace ds
