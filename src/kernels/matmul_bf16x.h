// Helpers of the bf16-activation matmul option (MatmulArgs::bf16_activations), shared by the paths.
// The option's meaning, on every path: x rounded to bf16 (nearest even), W decoded exactly as the
// default path decodes it (bf16 as is; fp8 · scale rounded once to f32; fp4 · 2^(e - 127)) and then
// rounded to bf16 (a no-op for bf16 weights, fp4 and fp8 with power-of-two scales: their decoded
// values fit bf16 exactly), the products of the two (exact in f32) summed in f32 in the path's lane
// order. f32 weights ignore the option.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace ds {

// True when MatmulArgs::bf16_activations changes the result for weights of this format.
bool bf16_activations_apply(WeightFormat format);

// matmul.h's round_rows_to_bf16, one value at a time (the reference and AVX2 tables' entry).
void round_rows_to_bf16_scalar(const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out);

// dst[r * w.cols + k] = bf16(weight_at_ref(w, n0 + r, k)) for r < nr, k < w.cols (any format).
void decode_rows_to_bf16_ref(const WeightMatrix& w, int64_t n0, int64_t nr, uint16_t* dst);

// W rows per decoded bf16 panel: about 256 KiB (L2), at least 8 rows.
int64_t bf16_panel_rows(int64_t cols);

// `cols_fn` (a path's f32 matmul_cols) on x rounded to bf16 and, for fp8/fp4 weights, on W decoded
// and rounded to bf16 panel by panel: the option's semantics on a path without a bf16 dot product
// (reference, AVX2, AVX-512 without AVX512_BF16).
void matmul_cols_with_bf16_x(void (*cols_fn)(const MatmulArgs&, int64_t, int64_t), const MatmulArgs& args,
                             int64_t n_begin, int64_t n_end);

}  // namespace ds
