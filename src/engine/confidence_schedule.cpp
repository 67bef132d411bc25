#include "engine/confidence_schedule.h"

#include <algorithm>

namespace ds {

std::vector<int32_t> schedule_by_confidence(std::span<const std::vector<float>> confidences,
                                            int64_t base_rows, const std::vector<CostPoint>& target) {
  struct Candidate {
    double survival;
    size_t seq;
    int32_t depth;  // 1-based: verifying it means verifying drafts 1..depth
  };
  std::vector<Candidate> order;
  for (size_t r = 0; r < confidences.size(); ++r) {
    double a = 1.0;
    for (size_t j = 0; j < confidences[r].size(); ++j) {
      a *= std::clamp(static_cast<double>(confidences[r][j]), 0.0, 1.0);
      if (a <= 0.0) break;
      order.push_back({a, r, static_cast<int32_t>(j + 1)});
    }
  }
  // Descending survival; ties by depth so a sequence's drafts stay in prefix order.
  std::stable_sort(order.begin(), order.end(), [](const Candidate& x, const Candidate& y) {
    return x.survival != y.survival ? x.survival > y.survival : x.depth < y.depth;
  });
  std::vector<int32_t> lengths(confidences.size(), 0), best = lengths;
  const double n_seqs = static_cast<double>(confidences.size());
  double rows = static_cast<double>(base_rows) + n_seqs;
  double tokens = n_seqs;
  double best_rate = tokens / std::max(1.0, SpeculationPolicy::interpolate(target, rows));
  for (const Candidate& c : order) {
    if (c.depth != lengths[c.seq] + 1) continue;  // only after its prefix (ties already ordered)
    lengths[c.seq] = c.depth;
    rows += 1.0;
    tokens += c.survival;
    const double rate = tokens / std::max(1.0, SpeculationPolicy::interpolate(target, rows));
    if (rate <= best_rate) break;  // the paper's early stop
    best_rate = rate;
    best = lengths;
  }
  return best;
}

}  // namespace ds
