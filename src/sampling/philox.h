// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based RNG, so a draw is a pure function of (key, counter) — no state to carry between
// steps, and the same (seed, position) gives the same number whatever batch a request sits in.
#pragma once

#include <array>
#include <cstdint>

namespace ds {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds, the Random123 reference constants.
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// Uniform double in [0, 1) with 53 random bits for a sampling draw.
// key = seed (low word, high word); counter = (position low, position high, draft_slot, 0).
// `position` is the output token's index in its sequence, `draft_slot` separates the draws of
// speculative drafts at the same position.
double philox_uniform(uint64_t seed, uint64_t position, uint32_t draft_slot = 0);

}  // namespace ds
