// FP8 E4M3 block quantisation as DeepSeek stores its Linear weights: one multiplier per 128×128
// tile, W ≈ fp8(q)·scale: V3 an F32 `weight_scale_inv`, V4 a power of two stored as E8M0 `.scale`.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"

namespace ds::modelgen {

struct Fp8BlockWeights {
  std::vector<uint8_t> q;        // [rows, cols] F8_E4M3 codes
  std::vector<float> scale_inv;  // [ceil(rows/block), ceil(cols/block)]
};

// Per tile: scale_inv = amax/448 (1 for an all-zero tile), q = fp8_rne(w/scale_inv), so the
// largest element of each tile maps to ±448. Edge tiles are partial. Deterministic for any pool.
Fp8BlockWeights quantize_fp8_blocks(const float* w, int64_t rows, int64_t cols, int64_t block,
                                    ThreadPool& pool);

struct Fp8BlockWeightsE8m0 {
  std::vector<uint8_t> q;       // [rows, cols] F8_E4M3 codes
  std::vector<uint8_t> scales;  // [ceil(rows/block), ceil(cols/block)] E8M0 bytes: 2^(b-127)
};

// Per tile: scale = 2^ceil(log2(amax/448)) (2^0 for an all-zero tile), the smallest power of two
// that keeps |w|/scale <= 448; q = fp8_rne(w/scale). Deterministic for any pool.
// block_rows > 0: tiles of block_rows × block instead (V4.1 Engram tables: 1 × 32, one scale per
// 32 columns of each row).
Fp8BlockWeightsE8m0 quantize_fp8_blocks_e8m0(const float* w, int64_t rows, int64_t cols, int64_t block,
                                             ThreadPool& pool, int64_t block_rows = 0);

// The E8M0 byte of the smallest power of two s with amax / s <= max_code (127 for amax == 0),
// clamped to the finite E8M0 range [0, 254].
uint8_t e8m0_scale_for(float amax, float max_code);

}  // namespace ds::modelgen
