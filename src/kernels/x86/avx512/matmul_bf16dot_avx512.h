// AVX-512 BF16 GEMV/GEMM with activations and weights rounded to bf16 (`vdpbf16ps`) for bf16, fp8
// and fp4 weights: the numerics option MatmulArgs::bf16_activations (docs/numerics.md "bf16 activations").
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace ds {

// Precondition: isa_supported(Isa::avx512), args.w->format is bf16, fp8 or fp4. Runs vdpbf16ps where
// cpu_has_avx512_bf16(), else rounds x (and decodes W) to bf16 and runs the f32 AVX-512 path on it.
// Lane order (every tile shape, every m): 32-column chunk c, lane l takes columns 32c + 2l and
// 32c + 2l + 1 (one vdpbf16ps per chunk, the last chunk zero-masked), then the fixed halving tree.
void matmul_cols_bf16dot_avx512(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

// matmul.h's round_rows_to_bf16 on AVX-512 (AVX-512F only: integer rounding, 16 values a step).
void round_rows_to_bf16_avx512(const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out);

}  // namespace ds
