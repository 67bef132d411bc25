#include "sampling/logits_processors.h"

#include <cstddef>

namespace ds {

namespace {

bool in_vocab(int32_t id, size_t vocab) { return id >= 0 && static_cast<size_t>(id) < vocab; }

}  // namespace

bool has_logit_edits(const SamplingParams& params, const PenaltyState& penalties) {
  if (!params.logit_bias.empty()) return true;
  if (params.repetition_penalty != 1.0f && !penalties.seen_token_ids().empty()) return true;
  return (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) &&
         !penalties.output_token_ids().empty();
}

void apply_bias_and_penalties(std::span<float> logits, const SamplingParams& params,
                              const PenaltyState& penalties) {
  const size_t vocab = logits.size();
  for (const LogitBias& b : params.logit_bias) {
    if (in_vocab(b.token_id, vocab)) logits[static_cast<size_t>(b.token_id)] += b.bias;
  }
  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    for (const int32_t id : penalties.seen_token_ids()) {
      if (!in_vocab(id, vocab)) continue;
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / r : l * r;
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    const std::span<const int32_t> ids = penalties.output_token_ids();
    const std::span<const uint32_t> counts = penalties.output_counts();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!in_vocab(ids[i], vocab)) continue;
      // count >= 1 for every listed id, so the presence term always applies here.
      logits[static_cast<size_t>(ids[i])] -=
          params.frequency_penalty * static_cast<float>(counts[i]) + params.presence_penalty;
    }
  }
}

}  // namespace ds
