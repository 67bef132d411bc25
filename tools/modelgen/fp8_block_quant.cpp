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

}  // namespace ds::modelgen
