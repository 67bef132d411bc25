// AVX-512 GEMV/GEMM over f32 / bf16 / fp8-block weights (16 f32 lanes; see kernels/matmul.h
// for the lane partition every tile shape shares).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace ds {

// Register tiles (x rows × W rows of 16-lane accumulators): 6 × 4 = 24 of the 32 zmm registers
// for the GEMM; the m = 1 GEMV streams 8 W rows at once to keep enough loads in flight, and
// m = 2 and 3 use 2 × 8 and 3 × 6 tiles for the same reason, m = 4 4 × 6 (not fp8; see run()).
inline constexpr int kAvx512TileM = 6;
inline constexpr int kAvx512TileN = 4;
inline constexpr int kAvx512GemvTileN = 8;

// Precondition: isa_supported(Isa::avx512). Any shape.
void matmul_cols_avx512(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace ds
