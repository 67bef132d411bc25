// The loop bodies of sampler_loops.h, included once per path (sampler_loops.cpp and
// x86/<isa>/sampler_loops_<isa>.cpp) and compiled with that path's flags. `static`: each file
// keeps its own copy, so no two paths' code can be merged by the linker.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>

#include "sampling/sampler_loops.h"
#include "sampling/sampling_rule.h"

namespace ds::sampler_loops_impl {

static void weights_of_row(const float* logits, float* weights, size_t vocab, float temperature,
                           float z_max) {
  for (size_t i = 0; i < vocab; ++i)
    weights[i] = sampling_rule::weight(sampling_rule::scaled_logit(logits[i], temperature), z_max);
}

static void exp_terms(const float* logits, float* terms, size_t n, float max_logit) {
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[i];
    const float e = sampling_rule::exp_approx((l == INFINITY ? FLT_MAX : l) - max_logit);
    terms[i] = std::isnan(l) || l == -INFINITY ? 0.0f : e;
  }
}

// Constant-initialised: building the table runs no instruction of the path.
static constexpr SamplerLoops kLoops{.weights_of_row = weights_of_row, .exp_terms = exp_terms};

}  // namespace ds::sampler_loops_impl
