#include "engine/speculation_policy.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ds {

namespace {
// Pseudo-counts of the prior per position: the measured rate takes over after a few dozen chunks.
constexpr double kPriorWeight = 8.0;
}  // namespace

SpeculationPolicy::SpeculationPolicy(int32_t k_max, double prior_acceptance)
    : k_max_(std::max(0, k_max)),
      reached_(static_cast<size_t>(k_max_), 0.0),
      accepted_(static_cast<size_t>(k_max_), 0.0),
      prior_(prior_acceptance) {}

void SpeculationPolicy::set_costs(std::vector<CostPoint> target, std::vector<CostPoint> draft) {
  target_ = std::move(target);
  draft_ = std::move(draft);
}

void SpeculationPolicy::record(int32_t n_verified, int32_t n_accepted) {
  const int32_t n = std::min(n_verified, k_max_);
  if (n <= 0) return;
  for (size_t j = 0; j < reached_.size(); ++j) {
    reached_[j] *= kDecay;
    accepted_[j] *= kDecay;
  }
  // Position j was reached when every draft before it was accepted.
  for (int32_t j = 0; j < n && j <= n_accepted; ++j) {
    reached_[static_cast<size_t>(j)] += 1.0;
    if (j < n_accepted) accepted_[static_cast<size_t>(j)] += 1.0;
  }
}

namespace {
// One observation of observed / predicted cost into an exponentially weighted log ratio, bounded.
void blend_cost_ratio(double& log_scale, double observed_ns, double predicted_ns) {
  if (!(observed_ns > 0) || !(predicted_ns > 0)) return;
  const double bound = std::log(SpeculationPolicy::kMaxScale);
  const double w = SpeculationPolicy::kCostLearn;
  log_scale = std::clamp((1 - w) * log_scale + w * std::log(observed_ns / predicted_ns), -bound, bound);
}
}  // namespace

void SpeculationPolicy::observe_target(int64_t rows, double ns) {
  if (!has_costs() || rows <= 0) return;
  blend_cost_ratio(log_target_scale_, ns, interpolate(target_, static_cast<double>(rows)));
}

void SpeculationPolicy::observe_draft(int32_t n_seqs, int32_t k, double ns) {
  if (!has_costs() || n_seqs <= 0 || k <= 0) return;
  blend_cost_ratio(log_draft_scale_, ns, measured_draft_cost(n_seqs, k));
}

void SpeculationPolicy::observe_step_overhead(double ns) {
  if (!(ns >= 0) || !std::isfinite(ns)) return;
  step_overhead_ns_ = step_overhead_ns_ == 0 ? ns : (1 - kCostLearn) * step_overhead_ns_ + kCostLearn * ns;
}

double SpeculationPolicy::target_scale() const { return std::exp(log_target_scale_); }
double SpeculationPolicy::draft_scale() const { return std::exp(log_draft_scale_); }

double SpeculationPolicy::acceptance(int32_t position) const {
  const size_t j = static_cast<size_t>(position);
  if (j >= reached_.size()) return 0.0;
  return (accepted_[j] + kPriorWeight * prior_) / (reached_[j] + kPriorWeight);
}

double SpeculationPolicy::interpolate(const std::vector<CostPoint>& curve, double rows) {
  if (curve.size() == 1) return curve[0].ns * rows / static_cast<double>(std::max<int64_t>(1, curve[0].rows));
  size_t hi = 1;
  while (hi + 1 < curve.size() && static_cast<double>(curve[hi].rows) < rows) ++hi;
  const CostPoint& a = curve[hi - 1];
  const CostPoint& b = curve[hi];
  const double t = (rows - static_cast<double>(a.rows)) / static_cast<double>(b.rows - a.rows);
  return std::max(0.0, a.ns + t * (b.ns - a.ns));
}

double SpeculationPolicy::expected_tokens(int32_t k) const {
  double tokens = 1.0;
  double reach = 1.0;
  for (int32_t j = 0; j < k; ++j) {
    reach *= acceptance(j);
    tokens += reach;
  }
  return tokens;
}

double SpeculationPolicy::measured_draft_cost(int32_t n_seqs, int32_t k) const {
  if (k <= 0) return 0.0;
  const double b = std::max(1, n_seqs);
  return interpolate(draft_, b * expected_tokens(k)) + (k - 1) * interpolate(draft_, b);
}

double SpeculationPolicy::expected_rate(int32_t n_seqs, int32_t k) const {
  const double b = std::max(1, n_seqs);
  const double tokens = expected_tokens(k);
  const double cost = step_overhead_ns_ + target_scale() * interpolate(target_, b * (k + 1)) +
                      draft_scale() * measured_draft_cost(n_seqs, k);
  return cost > 0 ? b * tokens / cost : 0.0;
}

int32_t SpeculationPolicy::best_k(int32_t n_seqs) const {
  if (!has_costs()) return k_max_;
  const double plain = expected_rate(n_seqs, 0);
  int32_t best = 0;
  double best_rate = plain * kMargin;
  for (int32_t k = 1; k <= k_max_; ++k) {
    const double r = expected_rate(n_seqs, k);
    if (r > best_rate) {
      best_rate = r;
      best = k;
    }
  }
  return best;
}

bool SpeculationPolicy::would_pay_at(double acceptance, int32_t n_seqs) const {
  SpeculationPolicy assumed(k_max_, acceptance);  // nothing recorded: every position at `acceptance`
  assumed.set_costs(target_, draft_);
  assumed.log_target_scale_ = log_target_scale_;
  assumed.log_draft_scale_ = log_draft_scale_;
  assumed.step_overhead_ns_ = step_overhead_ns_;
  return assumed.best_k(n_seqs) > 0;
}

int32_t SpeculationPolicy::choose(int32_t n_seqs) {
  if (n_seqs <= 0 || k_max_ == 0) return 0;
  const int32_t k = best_k(n_seqs);
  if (k > 0) {
    steps_off_ = 0;
    probe_left_ = 0;
    if (k < k_max_ && reached_[static_cast<size_t>(k)] < kDeeperEvidence &&
        ++steps_since_deeper_ >= kDeeperEvery) {
      steps_since_deeper_ = 0;
      return k + 1;  // position k + 1 has too few verified chunks to judge it
    }
    return k;
  }
  if (probe_left_ > 0) {
    --probe_left_;
    return 1;
  }
  if (reached_[0] < kLearnEvidence && would_pay_at(1.0, n_seqs)) return 1;  // learn a_1 first
  if (++steps_off_ >= kProbeEvery) {
    // Would speculation pay at the prior's acceptance? Then acceptance, not cost, turned it off:
    // look again (a drafter restarts its state on the first step, drafts on the next ones).
    steps_off_ = 0;
    if (would_pay_at(prior_, n_seqs)) {
      probe_left_ = kProbeSteps - 1;
      return 1;
    }
  }
  return 0;
}

}  // namespace ds
