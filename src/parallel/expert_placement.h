// Which rank holds which routed expert (docs/expert-parallel.md). Pure bookkeeping, the same for
// every MoE layer of a model, and the same on every rank (each computes it from the same inputs).
// An expert may have several copies (EPLB's redundant experts); a routed row goes to one of them,
// chosen by a key, and since the copies hold the same weights the choice never changes a result.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "parallel/eplb.h"

namespace ds {

struct ExpertPlacement {
  int n_ranks = 1;
  std::vector<std::vector<int32_t>> holders;  // [n_experts] ranks holding a copy, in slot order

  // Contiguous near-equal blocks, one copy each: with E = q·N + r, ranks 0..r-1 own q + 1
  // experts, the rest q. invalid_argument when n_ranks < 1 or n_experts < n_ranks.
  static Result<ExpertPlacement> contiguous(int64_t n_experts, int n_ranks);
  // From an EPLB result: slot s on rank s / (n_physical / n_ranks).
  static Result<ExpertPlacement> from_eplb(const EplbPlacement& eplb, int64_t n_experts, int n_ranks);

  int64_t n_experts() const { return static_cast<int64_t>(holders.size()); }
  bool holds(int rank, int32_t expert) const;
  // The rank that computes expert `expert` for a row with this key (copies taken in turn).
  int rank_for(int32_t expert, int64_t key) const {
    const std::vector<int32_t>& h = holders[static_cast<size_t>(expert)];
    return h[static_cast<size_t>(key % static_cast<int64_t>(h.size()))];
  }
  // The experts `rank` holds a copy of, ascending.
  std::vector<int32_t> local_experts(int rank) const;
};

// Max over ranks / mean over ranks of the load each rank serves, an expert's load split evenly over
// its copies (rows go to the copies in turn). 1 = balanced; 1 when the load is all zero.
double placement_imbalance(std::span<const float> load, const ExpertPlacement& p);

// One expert copy live EPLB must send (docs/expert-parallel.md): rank `to` holds `expert` in the
// new placement but not in the old one, and gets its weights from `from`, the lowest rank holding it
// in the old one. Sorted by (to, expert).
struct ExpertMove {
  int32_t expert = 0;
  int from = 0;
  int to = 0;
  bool operator==(const ExpertMove&) const = default;
};
// prev and next must have the same experts and ranks.
std::vector<ExpertMove> plan_expert_moves(const ExpertPlacement& prev, const ExpertPlacement& next);

// `next` with its ranks renumbered within each node (rank r on node r / (n_ranks / n_nodes)) so
// that as many of its expert copies as possible are already where `current` has them: EPLB numbers
// the ranks it packs arbitrarily, and the ranks of one node are interchangeable, so the rank loads
// (and the imbalance) do not change, only the weights live EPLB must move. Greedy on the largest
// overlap (ties to the lower new, then old, rank); the same result on every rank.
ExpertPlacement align_ranks(const ExpertPlacement& next, const ExpertPlacement& current, int n_nodes);

}  // namespace ds
