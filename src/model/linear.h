// A linear layer's weight as loaded from the checkpoint (stored precision, plus owned scale
// storage when the loader had to convert scales), and the y = x·Wᵀ call every block uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
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
  // The weight bytes (and FP4's E8M0 scales) when the matrix came from another process
  // (read_linear_bytes) rather than the mapped checkpoint; `w.data` / `w.scales_e8m0` point here.
  std::vector<std::byte> data_storage;
};

// A linear layer as bytes, so live EPLB can move a routed expert to another rank
// (docs/expert-parallel.md): a fixed header (format, shape, block shape, payload sizes), the weight
// bytes as stored, then the scales (f32 grid for FP8, E8M0 bytes for FP4). Appended to `out`.
void append_linear_bytes(const Linear& l, std::vector<std::byte>& out);
// Parses what append_linear_bytes wrote at in[offset], advancing offset past it; the result owns
// copies of the bytes, so a matmul over it gives the original's results bit for bit.
// model_bad_input for a truncated or inconsistent record.
Result<Linear> read_linear_bytes(std::span<const std::byte> in, size_t& offset);
// The same, and model_bad_input unless the matrix is [rows, cols].
Result<Linear> read_linear_bytes(std::span<const std::byte> in, size_t& offset, int64_t rows, int64_t cols);

// `<prefix>.weight` [rows, cols] (BF16, F32 or block-scaled F8_E4M3); errors name the tensor.
Result<Linear> load_linear_layer(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block);

// The rows `ids` (in that order) of a BF16 or F32 matrix, copied into `storage`, which the result
// points into: a head over a subset of the vocabulary (the MTP draft heads). invalid_argument for
// an id outside [0, w.rows), model_unsupported for another format; storage is emptied on error.
Result<WeightMatrix> select_rows(const WeightMatrix& w, std::span<const int32_t> ids,
                                 std::vector<uint8_t>& storage);

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
