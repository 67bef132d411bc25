#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/kernel_table.h"

namespace ds {

std::vector<float> rope_inv_freq(const RopeParams& p) {
  const int n_pairs = p.rope_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(std::max(n_pairs, 0)));
  if (n_pairs <= 0) return inv_freq;
  const double d = p.rope_dim;
  const bool yarn = p.yarn_factor > 1.0;
  double low = 0.0;
  double high = 0.0;
  if (yarn) {
    // c(r): the pair index whose wavelength fits r times into the original context.
    auto correction_dim = [&](double n_rot) {
      return d * std::log(p.yarn_original_max_pos / (n_rot * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(p.theta));
    };
    low = std::max(std::floor(correction_dim(p.yarn_beta_fast)), 0.0);
    high = std::min(std::ceil(correction_dim(p.yarn_beta_slow)), d - 1.0);
    if (high == low) high += 0.001;  // DeepSeek's linear_ramp_factor guard against 0/0
  }
  for (int i = 0; i < n_pairs; ++i) {
    double f = 1.0 / std::pow(p.theta, 2.0 * i / d);
    if (yarn) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      f = f * (1.0 - ramp) + (f / p.yarn_factor) * ramp;
    }
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inv_freq;
}

void rope_cos_sin(int32_t pos, const float* inv_freq, int64_t n_pairs, bool inverse, float* cos_v,
                  float* sin_v) {
  const float pos_f = static_cast<float>(pos);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float angle = pos_f * inv_freq[i];
    cos_v[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    sin_v[i] = inverse ? -s : s;
  }
}

void rope_interleaved(Isa isa, float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads,
                      int64_t head_stride, int64_t offset, const int32_t* pos,
                      const std::vector<float>& inv_freq, bool inverse) {
  const int64_t n_pairs = static_cast<int64_t>(inv_freq.size());
  if (n_tokens <= 0 || n_heads <= 0 || n_pairs == 0) return;
  std::vector<float> cos_v(static_cast<size_t>(n_pairs));
  std::vector<float> sin_v(static_cast<size_t>(n_pairs));
  const auto rotate = kernel_table(isa).rope_rotate;
  for (int64_t t = 0; t < n_tokens; ++t) {
    rope_cos_sin(pos[t], inv_freq.data(), n_pairs, inverse, cos_v.data(), sin_v.data());
    float* xt = x + t * token_stride + offset;
    rotate(xt, n_heads, head_stride, cos_v.data(), sin_v.data(), n_pairs);
  }
}

}  // namespace ds
