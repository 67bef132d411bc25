// Packed FP4 E2M1 quantisation as DeepSeek-V4 stores its routed experts (MXFP4-style): per row,
// one E8M0 power-of-two scale per 32 consecutive inputs; two codes per byte, element 2k in the
// LOW nibble of byte k (model-spec §6.3).
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"

namespace ds::modelgen {

// Nearest E2M1 code (bit 3 = sign; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to the even code,
// saturating at ±6. NaN maps to +0 (the generator never produces one).
uint8_t f32_to_fp4_e2m1(float x);

struct Fp4Weights {
  std::vector<uint8_t> packed;  // [rows, cols / 2]
  std::vector<uint8_t> scales;  // [rows, cols / 32] E8M0
};

// Per 32-group: scale = 2^ceil(log2(amax/6)) (2^0 for an all-zero group), code = e2m1(w/scale).
// cols must be a multiple of 32. Deterministic for any pool.
Fp4Weights quantize_fp4_rows(const float* w, int64_t rows, int64_t cols, ThreadPool& pool);

}  // namespace ds::modelgen
