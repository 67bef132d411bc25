// The scalar reference for Sampler: the rule of sampler.h done the obvious way — a full sort of
// the survivors, log-probabilities in double. O(vocab log vocab) per token; for tests and as the
// benchmark's baseline, never for serving.
#pragma once

#include <cstdint>
#include <span>

#include "sampling/penalty_state.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace ds {

SampleResult reference_sample(std::span<const float> logits, const SamplingParams& params,
                              const PenaltyState& penalties, uint64_t position, uint32_t draft_slot);

}  // namespace ds
