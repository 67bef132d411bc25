#include "kernels/ref/matmul_ref.h"

#include "tensor/dtype.h"

namespace ds {

float weight_at_ref(const WeightMatrix& w, int64_t r, int64_t c) {
  const int64_t idx = r * w.cols + c;
  switch (w.format) {
    case WeightFormat::f32:
      return static_cast<const float*>(w.data)[idx];
    case WeightFormat::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(w.data)[idx]);
    case WeightFormat::fp8_e4m3_block: {
      const float scale = w.scales[(r / w.block_rows) * w.scale_cols() + c / w.block_cols];
      return fp8_e4m3_to_f32(static_cast<const uint8_t*>(w.data)[idx]) * scale;
    }
    case WeightFormat::fp4_e2m1_block: {
      const uint8_t byte = static_cast<const uint8_t*>(w.data)[idx / 2];
      const uint8_t nibble = (idx % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      const uint8_t scale = w.scales_e8m0[r * w.scale_cols() + c / w.block_cols];
      return fp4_e2m1_to_f32(nibble) * e8m0_to_f32(scale);
    }
  }
  return 0.0f;
}

void matmul_cols_ref(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  const WeightMatrix& w = *args.w;
  for (int64_t i = 0; i < args.m; ++i) {
    const float* x_row = args.x + i * args.ldx;  // x_row: [cols]
    float* y_row = args.y + i * args.ldy;        // y_row: [rows]
    for (int64_t n = n_begin; n < n_end; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) acc += x_row[k] * weight_at_ref(w, n, k);
      y_row[n] = acc;
    }
  }
}

}  // namespace ds
