// Confidence-scheduled verification (DSpark paper, Algorithm 1; deepinfer-features.md §5.3): how
// many of each sequence's drafts one step verifies, given each draft's confidence c_{r,j} (the
// chance it is accepted once the ones before it are) and the target's step time by rows.
//
// a_{r,j} = c_{r,1} · … · c_{r,j} is the chance draft j of sequence r survives. Starting from
// every sequence verifying none (the step has base_rows + R rows and yields R tokens), drafts are
// added in descending a (a sorted prefix of every sequence, since a falls along j), each adding a
// row and a_{r,j} expected tokens, while the expected throughput tokens / step_ns(rows) improves;
// the walk stops at the first draft that does not improve it (the paper's early stop). The result
// depends only on the confidences and the curve, never on whether drafts are right, so
// verification stays lossless.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "engine/speculation_policy.h"

namespace ds {

// confidences[r]: sequence r's c_{r,1..γ_r} (may be empty); base_rows: the step's other rows;
// target: ns per target forward by rows (SpeculationCosts::target, at least one point). Returns
// ℓ_r per sequence, 0 <= ℓ_r <= confidences[r].size().
std::vector<int32_t> schedule_by_confidence(std::span<const std::vector<float>> confidences,
                                            int64_t base_rows, const std::vector<CostPoint>& target);

// DeepInfer's production variant (paper §5.2; deepinfer-features.md §5.3), for a pipeline that must
// size a step before its drafts' confidences exist: the capacity K is found from older confidences
// by the same walk run to the end with no early stop (real step-time curves have cliffs a greedy
// stop would not pass), keeping the best prefix; the step then verifies the K drafts of highest
// survival among its own. Both depend on confidences only, so verification stays lossless.
//
// The number of drafts in the best prefix of the full walk (0 when none pays).
int64_t capacity_by_confidence(std::span<const std::vector<float>> confidences, int64_t base_rows,
                               const std::vector<CostPoint>& target);
// ℓ_r per sequence for the k drafts of highest survival (a prefix of every sequence).
std::vector<int32_t> top_by_confidence(std::span<const std::vector<float>> confidences, int64_t k);

// The schedule a drafter applies step after step: Algorithm 1 on each step's confidences, or
// (delayed) the production variant, the top drafts up to the capacity found for the confidences of
// two steps back (the first two steps: Algorithm 1). Either counts the step's other rows (prefill
// chunks, decode rows without drafts) as the base of the curve.
class ConfidenceScheduler {
 public:
  ConfidenceScheduler() = default;  // inactive: every draft is kept
  ConfidenceScheduler(std::vector<CostPoint> target, bool delayed)
      : target_(std::move(target)), delayed_(delayed) {}

  bool active() const { return !target_.empty(); }
  // ℓ_r per sequence for one step's confidences, in a step that runs other_rows rows besides one
  // token row per sequence and the verified drafts; inactive: every draft.
  std::vector<int32_t> lengths(std::span<const std::vector<float>> confidences, int64_t other_rows);

 private:
  std::vector<CostPoint> target_;
  bool delayed_ = false;
  std::deque<int64_t> capacities_;  // delayed: the capacities of the last two steps, oldest first
};

}  // namespace ds
