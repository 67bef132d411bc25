#include "sampling/logprobs.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "sampling/sampler_loops.h"
#include "sampling/sampling_rule.h"

namespace ds {

namespace {

float finite_or_max(float l) { return l == INFINITY ? FLT_MAX : l; }

}  // namespace

double log_sum_exp(std::span<const float> logits) { return log_sum_exp(best_isa(), logits); }

double log_sum_exp(Isa isa, std::span<const float> logits) {
  const auto exp_terms = sampler_loops(isa).exp_terms;  // terms[i] = exp(l[i] - max), per-ISA loop
  float max_logit = sampling_rule::max_value(logits);
  if (max_logit == -INFINITY) return -INFINITY;
  max_logit = finite_or_max(max_logit);
  // exp in float over a chunk (vectorised), summed into 8 double accumulators in a fixed order.
  constexpr size_t kChunk = 1024;
  float terms[kChunk];
  double partial[8] = {};
  for (size_t start = 0; start < logits.size(); start += kChunk) {
    const size_t n = std::min(kChunk, logits.size() - start);
    exp_terms(logits.data() + start, terms, n, max_logit);
    for (size_t i = 0; i < n; ++i) partial[i % 8] += terms[i];
  }
  double total = 0.0;
  for (const double p : partial) total += p;
  return static_cast<double>(max_logit) + std::log(total);
}

int select_top_n(std::span<const float> logits, int n, std::span<TokenLogprob> out) {
  if (n > static_cast<int>(out.size())) n = static_cast<int>(out.size());
  if (n <= 0) return 0;
  int filled = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l)) continue;
    // Later ids lose ties, so only a strictly larger logit displaces the current last entry.
    if (filled == n && !(l > out[static_cast<size_t>(n - 1)].logprob)) continue;
    int pos = filled < n ? filled++ : n - 1;
    while (pos > 0 && l > out[static_cast<size_t>(pos - 1)].logprob) {
      out[static_cast<size_t>(pos)] = out[static_cast<size_t>(pos - 1)];
      --pos;
    }
    out[static_cast<size_t>(pos)] = {static_cast<int32_t>(i), l};
  }
  return filled;
}

}  // namespace ds
