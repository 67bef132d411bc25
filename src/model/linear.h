// A linear layer's weight as loaded from the checkpoint (stored precision, plus owned scale
// storage when the loader had to convert scales), and the y = x·Wᵀ call every block uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "tensor/weight_matrix.h"
#include "weights/checkpoint.h"

namespace ds {

struct Linear {
  WeightMatrix w;
  // Converted scales (V4-style E8M0); `w.scales` may point here. std::vector keeps its heap
  // buffer on move, so moving a Linear keeps `w.scales` valid.
  std::vector<float> scale_storage;
};

// `<prefix>.weight` [rows, cols] (BF16, F32 or block-scaled F8_E4M3); errors name the tensor.
Result<Linear> load_linear_layer(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block);

// The ISA a matmul over `w` runs on: the vector paths need w.cols % 16 == 0, so odd widths
// (only in tiny test models) take the reference path.
Isa matmul_isa(Isa requested, const WeightMatrix& w);

// y[m, w.rows] (row stride ldy) = x[m, w.cols] (row stride ldx) · Wᵀ, threads over output columns.
void linear(const ForwardContext& ctx, const WeightMatrix& w, const float* x, int64_t m, int64_t ldx,
            float* y, int64_t ldy);

// The whole matrix widened to f32, row-major [rows, cols] (exact for BF16; for FP8 each element
// is fp8(q)·scale rounded once to f32, the same product the kernels form in registers).
std::vector<float> dequantize_to_f32(const WeightMatrix& w);

}  // namespace ds
