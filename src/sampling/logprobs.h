// Log-probability helpers over a full logits row: log-sum-exp and the N most likely tokens.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "kernels/isa.h"

namespace ds {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// log Σ exp(l_i) over the row, NaN counted as -inf, +inf as FLT_MAX. Terms are float exp of
// (l_i - max) summed in double, so the result is good to about 1e-6 absolute for any row.
// Returns -inf for an empty or all -inf row.
double log_sum_exp(std::span<const float> logits);
// The same on a chosen path (every supported path gives the same bits); the form above uses best_isa().
double log_sum_exp(Isa isa, std::span<const float> logits);

// The n (<= out.size()) largest logits, descending, ties to the lower id; writes {id, logit} to
// out[0..returned) and returns how many (n or the count of non-NaN logits, whichever is smaller).
// One pass with an insertion into a tiny sorted array: O(vocab) for n <= 20.
int select_top_n(std::span<const float> logits, int n, std::span<TokenLogprob> out);

}  // namespace ds
