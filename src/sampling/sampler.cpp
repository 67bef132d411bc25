#include "sampling/sampler.h"

#include <cmath>

#include "sampling/philox.h"

namespace ds {

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return Status(ErrorCode::invalid_argument, "temperature must be a finite number >= 0");
  }
  return ok_status();
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_val = -INFINITY;
  bool found = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) continue;
    if (!found || v > best_val) {
      best = static_cast<int32_t>(i);
      best_val = v;
      found = true;
    }
  }
  return best;
}

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                        uint32_t draft_slot) {
  if (params.temperature == 0.0f) return argmax(logits);
  // softmax(logits / T) in double, shifted by the max so the largest weight is exactly 1.
  const int32_t top = argmax(logits);
  const double max_logit = logits[static_cast<size_t>(top)];
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  weights_.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i];
    const double w = std::isnan(l) ? 0.0 : std::exp((l - max_logit) * inv_t);
    weights_[i] = w;
    total += w;
  }
  if (!(total > 0.0) || !std::isfinite(total)) return top;
  // Inverse CDF: the first index whose running sum passes u·total.
  const double target = philox_uniform(params.seed, position, draft_slot) * total;
  double running = 0.0;
  int32_t last_nonzero = top;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] <= 0.0) continue;
    running += weights_[i];
    last_nonzero = static_cast<int32_t>(i);
    if (running > target) return last_nonzero;
  }
  return last_nonzero;  // u·total rounded up to the full sum
}

}  // namespace ds
