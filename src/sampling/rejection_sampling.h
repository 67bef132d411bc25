// Speculative sampling with a sampled draft distribution (Leviathan et al., "Fast Inference from
// Transformers via Speculative Decoding", 2023; Chen et al., "Accelerating Large Language Model
// Decoding with Speculative Sampling", 2023; docs/speculative.md):
//
//   a draft d was drawn from q; accept it with probability min(1, p(d) / q(d)); on rejection draw
//   the token from norm(max(0, p - q)).
//
// The token that comes out is distributed exactly as p, whatever q is (as long as d ~ q). Every
// draw is keyed like the sampler's (philox.h): (request seed, output position, slot), so a fixed
// seed gives the same tokens whatever batch the request sits in. The slots at one position:
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds {

// Keyed draw slots at one output position (slot 0 is the plain sample of sampler.h).
inline constexpr uint32_t kDraftDrawSlot = 1;     // the drafter's draw of d from q
inline constexpr uint32_t kAcceptDrawSlot = 2;    // u < p(d) / q(d) accepts d
inline constexpr uint32_t kResampleDrawSlot = 3;  // the draw from norm(max(0, p - q)) on rejection

// The first token whose running mass (summed in id order, in double) exceeds u · total mass; the
// last token of positive mass if rounding leaves u · total unreached. Precondition: some probs > 0.
int32_t draw_from(std::span<const float> probs, double u);

struct DraftVerdict {
  bool accepted = false;
  int32_t token = 0;  // the draft when accepted, else the token drawn from the residual
};

// p, q: probabilities over the same vocabulary (each sums to ~1); draft: a token with q[draft] > 0;
// u_accept, u_resample in [0, 1). scratch is reused for the residual. If the residual has no mass
// (p <= q everywhere, only possible when p == q up to rounding) the token is drawn from p.
DraftVerdict accept_or_resample(std::span<const float> p, std::span<const float> q, int32_t draft,
                                double u_accept, double u_resample, std::vector<float>& scratch);

}  // namespace ds
