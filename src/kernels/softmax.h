// Numerically stable softmax over a row, in place: x_i <- exp(x_i - max) / Σ exp(x_j - max), f32.
// Rows that are all -inf produce all zeros (never NaN). A row holding NaN or +inf becomes all NaN
// (the normaliser is undefined). The sum of exponentials is accumulated in f64.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

void softmax(Isa isa, float* x, int64_t n);

}  // namespace ds
