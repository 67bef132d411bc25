#include "model/linear.h"

#include <cstring>

#include "kernels/matmul.h"
#include "tensor/dtype.h"

namespace ds {

Result<Linear> load_linear_layer(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block) {
  Linear l;
  DS_ASSIGN_OR_RETURN(l.w, load_linear(ckpt, prefix, rows, cols, block, l.scale_storage));
  return l;
}

Isa matmul_isa(Isa requested, const WeightMatrix& w) { return w.cols % 16 == 0 ? requested : Isa::reference; }

void linear(const ForwardContext& ctx, const WeightMatrix& w, const float* x, int64_t m, int64_t ldx,
            float* y, int64_t ldy) {
  if (m == 0) return;
  MatmulArgs args;
  args.x = x;
  args.m = m;
  args.ldx = ldx;
  args.w = &w;
  args.y = y;
  args.ldy = ldy;
  args.bf16_activations = ctx.bf16_activations;
  matmul(matmul_isa(ctx.isa, w), *ctx.pool, args);
}

std::vector<float> dequantize_to_f32(const WeightMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) {
      const int64_t i = r * w.cols + c;
      float v = 0.0f;
      switch (w.format) {
        case WeightFormat::f32:
          v = static_cast<const float*>(w.data)[i];
          break;
        case WeightFormat::bf16:
          v = bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
          break;
        case WeightFormat::fp8_e4m3_block:
          v = fp8_e4m3_to_f32(static_cast<const uint8_t*>(w.data)[i]) *
              w.scales[(r / w.block_rows) * w.scale_cols() + c / w.block_cols];
          break;
        case WeightFormat::fp4_e2m1_block: {
          const uint8_t byte = static_cast<const uint8_t*>(w.data)[i / 2];
          const uint8_t nibble = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          v = fp4_e2m1_to_f32(nibble) * e8m0_to_f32(w.scales_e8m0[r * w.scale_cols() + c / w.block_cols]);
          break;
        }
      }
      out[static_cast<size_t>(i)] = v;
    }
  }
  return out;
}

}  // namespace ds
