// Token sampling from a logits row: greedy at temperature 0, else a draw from softmax(logits / T)
// with the counter-based RNG keyed by (seed, output position, draft slot). Minimal for now
// (top-k/p, penalties and logprobs arrive with the engine).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ds {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy; must be finite and >= 0
  uint64_t seed = 0;

  Status validate() const;  // invalid_argument naming the field
};

// Index of the largest logit; ties go to the lower index; NaN never wins (all-NaN -> 0).
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  // Precondition: params.validate() is ok and logits is non-empty.
  // position: the output token's index in its sequence (the RNG counter).
  int32_t sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                 uint32_t draft_slot = 0);

 private:
  std::vector<double> weights_;  // [vocab] unnormalised probabilities, reused between calls
};

}  // namespace ds
