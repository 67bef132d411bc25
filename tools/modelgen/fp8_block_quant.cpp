#include "fp8_block_quant.h"

#include <algorithm>
#include <cmath>

#include "tensor/dtype.h"

namespace ds::modelgen {

Fp8BlockWeights quantize_fp8_blocks(const float* w, int64_t rows, int64_t cols, int64_t block,
                                    ThreadPool& pool) {
  const int64_t block_rows = (rows + block - 1) / block;
  const int64_t block_cols = (cols + block - 1) / block;
  Fp8BlockWeights out;
  out.q.resize(static_cast<size_t>(rows * cols));
  out.scale_inv.resize(static_cast<size_t>(block_rows * block_cols));
  // One task per strip of `block` rows: strips touch disjoint outputs.
  pool.parallel_for(block_rows, [&](int64_t br) {
    const int64_t r0 = br * block;
    const int64_t r1 = std::min(rows, r0 + block);
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t c0 = bc * block;
      const int64_t c1 = std::min(cols, c0 + block);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      }
      const float scale_inv = amax > 0.0f ? amax / 448.0f : 1.0f;
      out.scale_inv[static_cast<size_t>(br * block_cols + bc)] = scale_inv;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          out.q[static_cast<size_t>(r * cols + c)] = f32_to_fp8_e4m3(w[r * cols + c] / scale_inv);
        }
      }
    }
  });
  return out;
}

uint8_t e8m0_scale_for(float amax, float max_code) {
  if (!(amax > 0.0f)) return 127;
  // amax/max_code = m·2^e with m in [0.5, 1): the smallest power of two >= it is 2^e, or
  // 2^(e-1) when m is exactly 0.5.
  // In double: the quotient of a tiny amax must not underflow to zero.
  int e = 0;
  const double m = std::frexp(static_cast<double>(amax) / max_code, &e);
  const int exponent = m == 0.5 ? e - 1 : e;
  return static_cast<uint8_t>(std::clamp(exponent + 127, 0, 254));
}

Fp8BlockWeightsE8m0 quantize_fp8_blocks_e8m0(const float* w, int64_t rows, int64_t cols, int64_t block,
                                             ThreadPool& pool, int64_t tile_rows) {
  const int64_t tile_h = tile_rows > 0 ? tile_rows : block;
  const int64_t block_rows = (rows + tile_h - 1) / tile_h;
  const int64_t block_cols = (cols + block - 1) / block;
  Fp8BlockWeightsE8m0 out;
  out.q.resize(static_cast<size_t>(rows * cols));
  out.scales.resize(static_cast<size_t>(block_rows * block_cols));
  pool.parallel_for(block_rows, [&](int64_t br) {
    const int64_t r0 = br * tile_h;
    const int64_t r1 = std::min(rows, r0 + tile_h);
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t c0 = bc * block;
      const int64_t c1 = std::min(cols, c0 + block);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      }
      const uint8_t scale_byte = e8m0_scale_for(amax, 448.0f);
      out.scales[static_cast<size_t>(br * block_cols + bc)] = scale_byte;
      // Dividing by a power of two is exact, so q is the RNE of the scaled weight.
      const float inv_scale = 1.0f / e8m0_to_f32(scale_byte);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          out.q[static_cast<size_t>(r * cols + c)] = f32_to_fp8_e4m3(w[r * cols + c] * inv_scale);
        }
      }
    }
  });
  return out;
}

}  // namespace ds::modelgen
