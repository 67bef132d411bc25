// AVX2 + FMA GEMV/GEMM over f32 / bf16 / fp8-block weights (8 f32 lanes; see kernels/matmul.h
// for the lane partition every tile shape shares).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace ds {

// Register tiles (x rows × W rows of 8-lane accumulators): 3 × 4 = 12 of the 16 ymm registers,
// leaving 3 for the x chunks and 1 for the converted W chunk. The m = 1 GEMV streams 4 W rows.
inline constexpr int kAvx2TileM = 3;
inline constexpr int kAvx2TileN = 4;
inline constexpr int kAvx2GemvTileN = 4;

// Precondition: isa_supported(Isa::avx2). Any shape.
void matmul_cols_avx2(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace ds
