#include "parallel/expert_placement.h"

#include <algorithm>
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
  p.holders.resize(static_cast<size_t>(n_experts));
  const int64_t q = n_experts / n_ranks, r = n_experts % n_ranks;
  int64_t e = 0;
  for (int rank = 0; rank < n_ranks; ++rank) {
    const int64_t n_own = q + (rank < r ? 1 : 0);
    for (int64_t i = 0; i < n_own; ++i) p.holders[static_cast<size_t>(e++)] = {rank};
  }
  return p;
}

Result<ExpertPlacement> ExpertPlacement::from_eplb(const EplbPlacement& eplb, int64_t n_experts,
                                                   int n_ranks) {
  const int64_t n_slots = static_cast<int64_t>(eplb.slot_expert.size());
  if (n_ranks < 1 || n_slots % n_ranks != 0) {
    return Status(ErrorCode::invalid_argument,
                  "EPLB slots do not divide over " + std::to_string(n_ranks) + " ranks");
  }
  ExpertPlacement p;
  p.n_ranks = n_ranks;
  p.holders.resize(static_cast<size_t>(n_experts));
  for (int64_t s = 0; s < n_slots; ++s) {
    const int32_t e = eplb.slot_expert[static_cast<size_t>(s)];
    if (e < 0 || e >= n_experts)
      return Status(ErrorCode::invalid_argument, "EPLB slot names an unknown expert");
    p.holders[static_cast<size_t>(e)].push_back(static_cast<int32_t>(s / (n_slots / n_ranks)));
  }
  for (int64_t e = 0; e < n_experts; ++e) {
    if (p.holders[static_cast<size_t>(e)].empty()) {
      return Status(ErrorCode::invalid_argument,
                    "EPLB placement leaves expert " + std::to_string(e) + " on no rank");
    }
  }
  return p;
}

bool ExpertPlacement::holds(int rank, int32_t expert) const {
  if (expert < 0 || expert >= n_experts()) return false;
  const std::vector<int32_t>& h = holders[static_cast<size_t>(expert)];
  return std::find(h.begin(), h.end(), rank) != h.end();
}

double placement_imbalance(std::span<const float> load, const ExpertPlacement& p) {
  std::vector<double> rank_load(static_cast<size_t>(p.n_ranks), 0.0);
  double total = 0;
  for (int64_t e = 0; e < p.n_experts() && e < static_cast<int64_t>(load.size()); ++e) {
    const std::vector<int32_t>& h = p.holders[static_cast<size_t>(e)];
    const double share = static_cast<double>(load[static_cast<size_t>(e)]) / static_cast<double>(h.size());
    for (int32_t r : h) rank_load[static_cast<size_t>(r)] += share;
    total += load[static_cast<size_t>(e)];
  }
  if (total <= 0) return 1.0;
  const double most = *std::max_element(rank_load.begin(), rank_load.end());
  return most / (total / p.n_ranks);
}

std::vector<ExpertMove> plan_expert_moves(const ExpertPlacement& prev, const ExpertPlacement& next) {
  std::vector<ExpertMove> moves;
  for (int to = 0; to < next.n_ranks; ++to) {
    for (int32_t e : next.local_experts(to)) {
      if (prev.holds(to, e)) continue;
      const std::vector<int32_t>& h = prev.holders[static_cast<size_t>(e)];
      moves.push_back(ExpertMove{e, *std::min_element(h.begin(), h.end()), to});
    }
  }
  return moves;
}

ExpertPlacement align_ranks(const ExpertPlacement& next, const ExpertPlacement& current, int n_nodes) {
  const int n = next.n_ranks;
  const int per_node = n_nodes >= 1 && n % n_nodes == 0 ? n / n_nodes : n;
  // overlap[p][r]: experts new rank p holds that old rank r holds already.
  std::vector<std::vector<int64_t>> overlap(static_cast<size_t>(n),
                                            std::vector<int64_t>(static_cast<size_t>(n), 0));
  for (int p = 0; p < n; ++p) {
    for (int32_t e : next.local_experts(p)) {
      for (int32_t r : current.holders[static_cast<size_t>(e)]) {
        if (r / per_node == p / per_node) ++overlap[static_cast<size_t>(p)][static_cast<size_t>(r)];
      }
    }
  }
  struct Pair {
    int64_t overlap;
    int p, r;
  };
  std::vector<Pair> pairs;
  for (int p = 0; p < n; ++p) {
    for (int r = p / per_node * per_node; r < (p / per_node + 1) * per_node; ++r)
      pairs.push_back({overlap[static_cast<size_t>(p)][static_cast<size_t>(r)], p, r});
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.overlap > b.overlap; });
  std::vector<int> rank_of(static_cast<size_t>(n), -1);
  std::vector<bool> taken(static_cast<size_t>(n), false);
  for (const Pair& pr : pairs) {
    if (rank_of[static_cast<size_t>(pr.p)] >= 0 || taken[static_cast<size_t>(pr.r)]) continue;
    rank_of[static_cast<size_t>(pr.p)] = pr.r;
    taken[static_cast<size_t>(pr.r)] = true;
  }
  ExpertPlacement out = next;
  for (std::vector<int32_t>& h : out.holders) {
    for (int32_t& r : h) r = rank_of[static_cast<size_t>(r)];
  }
  return out;
}

std::vector<int32_t> ExpertPlacement::local_experts(int rank) const {
  std::vector<int32_t> out;
  for (int64_t e = 0; e < n_experts(); ++e)
    if (holds(rank, static_cast<int32_t>(e))) out.push_back(static_cast<int32_t>(e));
  return out;
}

}  // namespace ds
