// Helpers of the bf16-activation matmul option (MatmulArgs::bf16_activations), shared by the paths.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace ds {

// x [m, w.cols] rounded to bf16 (nearest even, NaN kept quiet: tensor/dtype.h), rows packed
// with stride w.cols.
std::vector<uint16_t> round_rows_to_bf16(const MatmulArgs& args);

// `cols_fn` (a path's f32 matmul_cols) on x rounded to bf16: the option's semantics on a path
// without a bf16 dot product (reference, AVX2, AVX-512 without AVX512_BF16).
void matmul_cols_with_bf16_x(void (*cols_fn)(const MatmulArgs&, int64_t, int64_t), const MatmulArgs& args,
                             int64_t n_begin, int64_t n_end);

}  // namespace ds
