// AVX2 GEMV/GEMM over FP4 E2M1 weights with E8M0 scales per 32 columns (V4 routed experts),
// dequantised in registers. Lane order: see kernels/matmul.h (fp4) and x86/fp4_pack.h.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace ds {

// Precondition: isa_supported(Isa::avx2), args.w->format == fp4_e2m1_block with
// block_rows == 1, block_cols == 32, cols % 32 == 0. Any m, any column range.
void matmul_cols_fp4_avx2(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace ds
