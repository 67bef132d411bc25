#include "kernels/matmul_bf16x.h"

#include <algorithm>

#include "kernels/ref/matmul_ref.h"
#include "tensor/dtype.h"

namespace ds {

bool bf16_activations_apply(WeightFormat format) { return format != WeightFormat::f32; }

void round_rows_to_bf16_scalar(const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t k = 0; k < cols; ++k) out[i * cols + k] = f32_to_bf16(x[i * ldx + k]);
  }
}

void decode_rows_to_bf16_ref(const WeightMatrix& w, int64_t n0, int64_t nr, uint16_t* dst) {
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t k = 0; k < w.cols; ++k) dst[r * w.cols + k] = f32_to_bf16(weight_at_ref(w, n0 + r, k));
  }
}

int64_t bf16_panel_rows(int64_t cols) {
  return std::max<int64_t>(8, (int64_t{256} << 10) / std::max<int64_t>(1, 2 * cols) / 8 * 8);
}

void matmul_cols_with_bf16_x(void (*cols_fn)(const MatmulArgs&, int64_t, int64_t), const MatmulArgs& args,
                             int64_t n_begin, int64_t n_end) {
  const int64_t cols = args.w->cols;
  std::vector<float> xr(static_cast<size_t>(args.m * cols));
  for (int64_t i = 0; i < args.m; ++i) {
    for (int64_t k = 0; k < cols; ++k) {
      xr[static_cast<size_t>(i * cols + k)] = args.x_bf16 != nullptr
                                                  ? bf16_to_f32(args.x_bf16[i * cols + k])
                                                  : round_to_bf16(args.x[i * args.ldx + k]);
    }
  }
  MatmulArgs rounded = args;
  rounded.x = xr.data();
  rounded.ldx = cols;
  rounded.bf16_activations = false;
  rounded.x_bf16 = nullptr;
  if (args.w->format == WeightFormat::bf16 || !bf16_activations_apply(args.w->format))
    return cols_fn(rounded, n_begin, n_end);
  // fp8 / fp4: W rows decoded and rounded to bf16 a panel at a time, run as a bf16 matrix.
  const int64_t panel = bf16_panel_rows(cols);
  std::vector<uint16_t> wb(static_cast<size_t>(std::min(panel, n_end - n_begin) * cols));
  for (int64_t nb = n_begin; nb < n_end; nb += panel) {
    const int64_t nr = std::min(panel, n_end - nb);
    decode_rows_to_bf16_ref(*args.w, nb, nr, wb.data());
    WeightMatrix view;
    view.format = WeightFormat::bf16;
    view.data = wb.data();
    view.rows = nr;
    view.cols = cols;
    MatmulArgs part = rounded;
    part.w = &view;
    part.y = args.y + nb;
    cols_fn(part, 0, nr);
  }
}

}  // namespace ds
