// The sparse logits edits that come before temperature: logit bias, then the repetition penalty,
// then presence/frequency penalties. Each touches only the token ids named in the params or the
// PenaltyState, so the cost is O(#bias + #distinct tokens seen), never O(vocab).
#pragma once

#include <span>

#include "sampling/penalty_state.h"
#include "sampling/sampling_params.h"

namespace ds {

// In order, on logits: [vocab]
//   1. logit_bias:          l[t] += bias[t]
//   2. repetition_penalty r over ids in prompt ∪ output (HF / vLLM): l > 0 ? l / r : l * r
//   3. presence p, frequency f over output ids (OpenAI): l[t] -= f · count[t] + p · (count[t] > 0)
// Ids outside [0, vocab) are skipped: a token that cannot be sampled needs no penalty.
// Precondition: params.validate() is ok.
void apply_bias_and_penalties(std::span<float> logits, const SamplingParams& params,
                              const PenaltyState& penalties);

// True when apply_bias_and_penalties would change something (so callers can skip the copy).
bool has_logit_edits(const SamplingParams& params, const PenaltyState& penalties);

}  // namespace ds
