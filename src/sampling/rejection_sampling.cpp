#include "sampling/rejection_sampling.h"

#include <algorithm>

#include "base/assert.h"

namespace ds {

int32_t draw_from(std::span<const float> probs, double u) {
  double total = 0;
  for (const float x : probs) total += static_cast<double>(x);
  DS_ASSERT(total > 0, "draw_from needs a distribution with positive mass");
  const double target = u * total;
  double running = 0;
  int32_t last_positive = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    running += static_cast<double>(probs[i]);
    last_positive = static_cast<int32_t>(i);
    if (running > target) return last_positive;
  }
  return last_positive;
}

DraftVerdict accept_or_resample(std::span<const float> p, std::span<const float> q, int32_t draft,
                                double u_accept, double u_resample, std::vector<float>& scratch) {
  DS_ASSERT(p.size() == q.size(), "p and q must cover the same vocabulary");
  DS_ASSERT(draft >= 0 && static_cast<size_t>(draft) < q.size() && q[static_cast<size_t>(draft)] > 0.0f,
            "the draft must have been drawn from q");
  const double pd = static_cast<double>(p[static_cast<size_t>(draft)]);
  const double qd = static_cast<double>(q[static_cast<size_t>(draft)]);
  // u < p/q, written without the division: u in [0, 1) always accepts when p >= q.
  if (u_accept * qd < pd) return {true, draft};
  scratch.resize(p.size());
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    scratch[i] = std::max(0.0f, p[i] - q[i]);
    mass += static_cast<double>(scratch[i]);
  }
  if (mass <= 0) return {false, draw_from(p, u_resample)};
  return {false, draw_from(scratch, u_resample)};
}

}  // namespace ds
