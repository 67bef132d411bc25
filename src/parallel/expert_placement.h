// Which rank owns which routed expert (docs/expert-parallel.md). Pure bookkeeping, the same for
// every MoE layer of a model, and the same on every rank (each computes it from the same inputs).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ds {

struct ExpertPlacement {
  int n_ranks = 1;
  std::vector<int32_t> owner;  // [n_experts] the rank that computes expert e

  // Contiguous near-equal blocks: with E = q·N + r, ranks 0..r-1 own q + 1 experts, the rest q
  // (DeepSeek's static EP layout). invalid_argument when n_ranks < 1 or n_experts < n_ranks.
  static Result<ExpertPlacement> contiguous(int64_t n_experts, int n_ranks);

  int64_t n_experts() const { return static_cast<int64_t>(owner.size()); }
  // The experts `rank` owns, ascending.
  std::vector<int32_t> local_experts(int rank) const;
};

}  // namespace ds
