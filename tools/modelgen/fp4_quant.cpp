#include "fp4_quant.h"

#include <algorithm>
#include <cmath>

#include "base/assert.h"
#include "fp8_block_quant.h"
#include "tensor/dtype.h"

namespace ds::modelgen {

namespace {
constexpr int64_t kGroup = 32;
constexpr float kFp4Max = 6.0f;  // largest E2M1 magnitude
}  // namespace

uint8_t f32_to_fp4_e2m1(float x) {
  if (std::isnan(x)) return 0;
  // Decision points are the midpoints of the grid {0, 0.5, 1, 1.5, 2, 3, 4, 6}; a midpoint goes
  // to the even code (<= for a lower even neighbour, < for a lower odd one). Beyond 5 everything
  // saturates to 6.
  const float a = std::fabs(x);
  uint8_t code;
  if (a <= 0.25f) {
    code = 0;
  } else if (a < 0.75f) {
    code = 1;
  } else if (a <= 1.25f) {
    code = 2;
  } else if (a < 1.75f) {
    code = 3;
  } else if (a <= 2.5f) {
    code = 4;
  } else if (a < 3.5f) {
    code = 5;
  } else if (a <= 5.0f) {
    code = 6;
  } else {
    code = 7;
  }
  return static_cast<uint8_t>(code | (x < 0.0f ? 8u : 0u));
}

Fp4Weights quantize_fp4_rows(const float* w, int64_t rows, int64_t cols, ThreadPool& pool) {
  DS_ASSERT(cols % kGroup == 0, "FP4 rows need whole 32-element groups");
  const int64_t n_groups = cols / kGroup;
  Fp4Weights out;
  out.packed.resize(static_cast<size_t>(rows * cols / 2));
  out.scales.resize(static_cast<size_t>(rows * n_groups));
  pool.parallel_range(rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < n_groups; ++g) {
        const float* x = w + r * cols + g * kGroup;
        float amax = 0.0f;
        for (int64_t i = 0; i < kGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
        const uint8_t scale_byte = e8m0_scale_for(amax, kFp4Max);
        out.scales[static_cast<size_t>(r * n_groups + g)] = scale_byte;
        const float inv_scale = 1.0f / e8m0_to_f32(scale_byte);
        uint8_t* dst = out.packed.data() + r * cols / 2 + g * kGroup / 2;
        for (int64_t k = 0; k < kGroup / 2; ++k) {
          const uint8_t lo = f32_to_fp4_e2m1(x[2 * k] * inv_scale);
          const uint8_t hi = f32_to_fp4_e2m1(x[2 * k + 1] * inv_scale);
          dst[k] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  });
  return out;
}

}  // namespace ds::modelgen
