#include "kernels/ref/v4_rows_ref.h"

#include <cmath>
#include <limits>

#include "tensor/dtype.h"

namespace ds::ref {

void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * ld;  // row: [n]
    for (int64_t h = 1; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const float a = row[j];
          const float b = row[j + h];
          row[j] = a + b;
          row[j + h] = a - b;
        }
      }
    }
    for (int64_t j = 0; j < n; ++j) row[j] *= scale;
  }
}

float quant_grid_round(QuantGrid grid, float q) {
  if (grid == QuantGrid::fp8_e4m3) return fp8_e4m3_to_f32(f32_to_fp8_e4m3(q));
  static constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float mag = std::fabs(q);
  int best = 0;
  for (int code = 1; code < 8; ++code) {
    const float d_best = std::fabs(mag - kE2m1[best]);
    const float d = std::fabs(mag - kE2m1[code]);
    // Strictly nearer wins; on a tie the even code (mantissa bit 0) wins.
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return std::signbit(q) ? -kE2m1[best] : kE2m1[best];
}

void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  const float grid_max = spec.grid == QuantGrid::fp8_e4m3 ? 448.0f : 6.0f;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b0 = 0; b0 < n; b0 += spec.block) {
      float* blk = x + r * ld + b0;  // blk: [block]
      float amax = 0.0f;
      bool finite = true;
      for (int32_t i = 0; i < spec.block; ++i) {
        finite = finite && std::isfinite(blk[i]);
        amax = std::fmax(amax, std::fabs(blk[i]));
      }
      if (!finite) {
        for (int32_t i = 0; i < spec.block; ++i) blk[i] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const float s = quant_sim_block_scale(spec, amax);
      for (int32_t i = 0; i < spec.block; ++i) {
        float q = blk[i] / s;
        q = q > grid_max ? grid_max : (q < -grid_max ? -grid_max : q);
        blk[i] = quant_grid_round(spec.grid, q) * s;
      }
    }
  }
}

}  // namespace ds::ref
