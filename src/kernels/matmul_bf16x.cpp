#include "kernels/matmul_bf16x.h"

#include "tensor/dtype.h"

namespace ds {

std::vector<uint16_t> round_rows_to_bf16(const MatmulArgs& args) {
  const int64_t cols = args.w->cols;
  std::vector<uint16_t> xb(static_cast<size_t>(args.m * cols));
  for (int64_t i = 0; i < args.m; ++i) {
    for (int64_t k = 0; k < cols; ++k)
      xb[static_cast<size_t>(i * cols + k)] = f32_to_bf16(args.x[i * args.ldx + k]);
  }
  return xb;
}

void matmul_cols_with_bf16_x(void (*cols_fn)(const MatmulArgs&, int64_t, int64_t), const MatmulArgs& args,
                             int64_t n_begin, int64_t n_end) {
  const int64_t cols = args.w->cols;
  std::vector<float> xr(static_cast<size_t>(args.m * cols));
  for (int64_t i = 0; i < args.m; ++i) {
    for (int64_t k = 0; k < cols; ++k)
      xr[static_cast<size_t>(i * cols + k)] = round_to_bf16(args.x[i * args.ldx + k]);
  }
  MatmulArgs rounded = args;
  rounded.x = xr.data();
  rounded.ldx = cols;
  rounded.bf16_activations = false;
  cols_fn(rounded, n_begin, n_end);
}

}  // namespace ds
