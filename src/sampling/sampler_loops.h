// The sampler's vocabulary-wide loops, one table per instruction-set path (the kernels' dispatch
// mechanism, kernels/isa.h, not compiler function multi-versioning). Every path is the same plain
// loop compiled with that path's flags; ds_sampling builds with -ffp-contract=off and the loops
// use only elementwise IEEE operations, so every path gives the same floats (sampler_test checks
// each supported path against the baseline bit for bit).
#pragma once

#include <cstddef>

#include "kernels/isa.h"

namespace ds {

struct SamplerLoops {
  // weights[i] = weight(scaled_logit(logits[i], temperature), z_max) (sampling_rule.h).
  void (*weights_of_row)(const float* logits, float* weights, size_t vocab, float temperature,
                         float z_max) = nullptr;
  // terms[i] = exp_approx(l[i] − max_logit), 0 for NaN and −inf (+inf counts as FLT_MAX).
  void (*exp_terms)(const float* logits, float* terms, size_t n, float max_logit) = nullptr;
};

// Precondition: isa_supported(isa).
const SamplerLoops& sampler_loops(Isa isa);

const SamplerLoops& reference_sampler_loops();  // baseline x86-64 build of the loops
const SamplerLoops& avx2_sampler_loops();
const SamplerLoops& avx512_sampler_loops();

}  // namespace ds
