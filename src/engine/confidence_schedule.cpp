#include "engine/confidence_schedule.h"

#include <algorithm>

namespace ds {

namespace {

struct Candidate {
  double survival;
  size_t seq;
  int32_t depth;  // 1-based: verifying it means verifying drafts 1..depth
};

// Every draft with survival a > 0, in descending a; ties by depth so a sequence's drafts stay in
// prefix order (a falls along j, so the order is a sorted prefix of every sequence).
std::vector<Candidate> by_survival(std::span<const std::vector<float>> confidences) {
  std::vector<Candidate> order;
  for (size_t r = 0; r < confidences.size(); ++r) {
    double a = 1.0;
    for (size_t j = 0; j < confidences[r].size(); ++j) {
      a *= std::clamp(static_cast<double>(confidences[r][j]), 0.0, 1.0);
      if (a <= 0.0) break;
      order.push_back({a, r, static_cast<int32_t>(j + 1)});
    }
  }
  std::stable_sort(order.begin(), order.end(), [](const Candidate& x, const Candidate& y) {
    return x.survival != y.survival ? x.survival > y.survival : x.depth < y.depth;
  });
  return order;
}

// The walk of Algorithm 1: drafts added in `order` while (early_stop) the expected rate improves,
// or all of them (no early stop); returns the lengths of the best prefix and its draft count.
std::vector<int32_t> walk(std::span<const std::vector<float>> confidences,
                          const std::vector<Candidate>& order, int64_t base_rows,
                          const std::vector<CostPoint>& target, bool early_stop, int64_t& best_count) {
  std::vector<int32_t> lengths(confidences.size(), 0), best = lengths;
  const double n_seqs = static_cast<double>(confidences.size());
  double rows = static_cast<double>(base_rows) + n_seqs;
  double tokens = n_seqs;
  double best_rate = tokens / std::max(1.0, SpeculationPolicy::interpolate(target, rows));
  int64_t count = 0;
  best_count = 0;
  for (const Candidate& c : order) {
    if (c.depth != lengths[c.seq] + 1) continue;  // only after its prefix (ties already ordered)
    lengths[c.seq] = c.depth;
    rows += 1.0;
    tokens += c.survival;
    ++count;
    const double rate = tokens / std::max(1.0, SpeculationPolicy::interpolate(target, rows));
    if (rate <= best_rate) {
      if (early_stop) break;  // the paper's early stop
      continue;
    }
    best_rate = rate;
    best = lengths;
    best_count = count;
  }
  return best;
}

}  // namespace

std::vector<int32_t> schedule_by_confidence(std::span<const std::vector<float>> confidences,
                                            int64_t base_rows, const std::vector<CostPoint>& target) {
  int64_t count = 0;
  return walk(confidences, by_survival(confidences), base_rows, target, /*early_stop=*/true, count);
}

int64_t capacity_by_confidence(std::span<const std::vector<float>> confidences, int64_t base_rows,
                               const std::vector<CostPoint>& target) {
  int64_t count = 0;
  (void)walk(confidences, by_survival(confidences), base_rows, target, /*early_stop=*/false, count);
  return count;
}

std::vector<int32_t> ConfidenceScheduler::lengths(std::span<const std::vector<float>> confidences,
                                                  int64_t other_rows) {
  if (!active()) {
    std::vector<int32_t> all;
    for (const std::vector<float>& c : confidences) all.push_back(static_cast<int32_t>(c.size()));
    return all;
  }
  if (!delayed_) return schedule_by_confidence(confidences, other_rows, target_);
  std::vector<int32_t> keep = capacities_.size() == 2
                                  ? top_by_confidence(confidences, capacities_.front())
                                  : schedule_by_confidence(confidences, other_rows, target_);
  capacities_.push_back(capacity_by_confidence(confidences, other_rows, target_));
  if (capacities_.size() > 2) capacities_.pop_front();
  return keep;
}

std::vector<int32_t> top_by_confidence(std::span<const std::vector<float>> confidences, int64_t k) {
  std::vector<int32_t> lengths(confidences.size(), 0);
  int64_t taken = 0;
  for (const Candidate& c : by_survival(confidences)) {
    if (taken >= k) break;
    if (c.depth != lengths[c.seq] + 1) continue;
    lengths[c.seq] = c.depth;
    ++taken;
  }
  return lengths;
}

}  // namespace ds
