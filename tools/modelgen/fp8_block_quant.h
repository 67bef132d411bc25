// FP8 E4M3 block quantisation as DeepSeek-V3 stores its Linear weights: one F32 multiplier
// (`weight_scale_inv`) per 128×128 tile, W ≈ fp8(q)·scale_inv.
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

}  // namespace ds::modelgen
