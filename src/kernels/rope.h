// Rotary position embedding, "interleaved" form used by MLA: pairs (x[2i], x[2i+1]) are a complex
// number multiplied by e^{i·pos·freq_i}. Angles and products in f32.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/isa.h"

namespace ds {

struct RopeParams {
  int rope_dim = 64;  // channels rotated (pairs = rope_dim / 2)
  double theta = 10000.0;
  // YaRN (disabled when factor <= 1): blend f_i and f_i/factor over the ramp [low, high] with
  // low = floor(c(beta_fast)), high = ceil(c(beta_slow)), c(r) = d·ln(L/(2πr)) / (2 ln θ).
  double yarn_factor = 1.0;
  double yarn_original_max_pos = 4096.0;
  double yarn_beta_fast = 32.0;
  double yarn_beta_slow = 1.0;
};

// Inverse frequencies f_i (YaRN-adjusted), i = 0 .. rope_dim/2 - 1, as f32.
std::vector<float> rope_inv_freq(const RopeParams& p);

// The per-token rotation table shared by every Isa path (so paths differ only in the rotation
// arithmetic): angle_i = (float)pos · inv_freq[i] as an f32 product, then cos/sin evaluated in
// double on that f32 angle and rounded to f32 (correctly rounded to within 1 ulp; f32 libm
// sinf/cosf would do as well, but double keeps the table independent of the libm's f32 paths).
// inverse = true negates the sine (rotation by −angle). cos_v, sin_v: [n_pairs].
void rope_cos_sin(int32_t pos, const float* inv_freq, int64_t n_pairs, bool inverse, float* cos_v,
                  float* sin_v);

// Rotates x[t, h, offset .. offset+rope_dim) in place for each token t (position pos[t]) and
// head h. Layout: token t, head h starts at x + t*token_stride + h*head_stride.
// inverse = true rotates by -pos (V4's output un-rotation).
void rope_interleaved(Isa isa, float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads,
                      int64_t head_stride, int64_t offset, const int32_t* pos,
                      const std::vector<float>& inv_freq, bool inverse = false);

}  // namespace ds
