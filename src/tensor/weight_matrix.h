// The kernel-facing view of a linear layer's weight W [rows = out_features, cols = in_features],
// row-major, left in its stored precision (dequantised in registers by the kernels).
#pragma once

#include <cstdint>

namespace ds {

enum class WeightFormat : uint8_t {
  f32,
  bf16,
  // FP8 E4M3 with one f32 multiplier per [block_rows x block_cols] tile:
  // W[r, c] = fp8(data[r * cols + c]) * scales[(r / block_rows) * scale_cols() + c / block_cols].
  // V3's `weight_scale_inv` (F32) and V4's E8M0 `.scale` (converted to f32 at load) both land here.
  fp8_e4m3_block,
  // FP4 E2M1 (MXFP4-style routed experts of V4/V4.1), two per byte, element 2k in the LOW nibble of
  // byte k of its row: W[r, c] = e2m1(nibble(r, c)) * 2^(scales_e8m0[r * scale_cols() + c / block_cols] -
  // 127) with block_rows = 1, block_cols = 32. Scales stay E8M0 bytes (read straight from the mapped
  // checkpoint), so a pass streams 4.25 bits per weight. cols must be a multiple of block_cols.
  fp4_e2m1_block,
};

struct WeightMatrix {
  WeightFormat format = WeightFormat::f32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  const float* scales = nullptr;         // fp8_e4m3_block only
  const uint8_t* scales_e8m0 = nullptr;  // fp4_e2m1_block only: [rows, cols / block_cols]
  int32_t block_rows = 128;
  int32_t block_cols = 128;

  int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
  // Bytes the kernels stream per full pass over W (for roofline accounting).
  int64_t stored_bytes() const {
    if (format == WeightFormat::fp4_e2m1_block) return rows * cols / 2 + scale_rows() * scale_cols();
    const int64_t elem = format == WeightFormat::f32 ? 4 : format == WeightFormat::bf16 ? 2 : 1;
    int64_t b = rows * cols * elem;
    if (format == WeightFormat::fp8_e4m3_block) b += scale_rows() * scale_cols() * 4;
    return b;
  }
};

}  // namespace ds
