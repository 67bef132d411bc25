#include "parallel/expert_placement.h"

#include <string>

namespace ds {

Result<ExpertPlacement> ExpertPlacement::contiguous(int64_t n_experts, int n_ranks) {
  if (n_ranks < 1) return Status(ErrorCode::invalid_argument, "expert parallelism needs at least one rank");
  if (n_experts < n_ranks) {
    return Status(ErrorCode::invalid_argument,
                  "expert parallelism over " + std::to_string(n_ranks) +
                      " ranks needs at least as many routed experts (the model has " +
                      std::to_string(n_experts) + ")");
  }
  ExpertPlacement p;
  p.n_ranks = n_ranks;
  p.owner.resize(static_cast<size_t>(n_experts));
  const int64_t q = n_experts / n_ranks, r = n_experts % n_ranks;
  int64_t e = 0;
  for (int rank = 0; rank < n_ranks; ++rank) {
    const int64_t n_own = q + (rank < r ? 1 : 0);
    for (int64_t i = 0; i < n_own; ++i) p.owner[static_cast<size_t>(e++)] = rank;
  }
  return p;
}

std::vector<int32_t> ExpertPlacement::local_experts(int rank) const {
  std::vector<int32_t> out;
  for (size_t e = 0; e < owner.size(); ++e)
    if (owner[e] == rank) out.push_back(static_cast<int32_t>(e));
  return out;
}

}  // namespace ds
