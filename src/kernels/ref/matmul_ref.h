// Scalar reference matmul: the definition every vector path is tested against.
// Sequential f32 accumulation over k in increasing order, one product per term; it is batch
// invariant trivially (each y[i, n] is its own loop).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "tensor/weight_matrix.h"

namespace ds {

// W[r, c] dequantised exactly as the format defines it (fp8 NaN codes 0x7f/0xff give NaN).
float weight_at_ref(const WeightMatrix& w, int64_t r, int64_t c);

// y[i, n] for all i < m and n in [n_begin, n_end). Any shape.
void matmul_cols_ref(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace ds
