// SpeculationPolicy: how many drafts each sequence verifies in a step (docs/speculative.md,
// "Turning speculation down"). Speculation pays when the k + 1 verify rows and the drafter's
// forwards cost less than the tokens they are expected to yield; on a compute-bound step (many
// sequences, big rows) or with low acceptance it does not, and the step is better run plainly.
//
// The policy keeps
//   - a cost curve measured at engine start (Engine::create runs the target forward over B
//     sequences of r rows, and the drafter's forward over B rows): target_ns(rows), draft_ns(rows);
//   - the acceptance rate per draft position, conditional on reaching it, from the verified steps
//     (exponentially decayed, so it follows the traffic), starting from a prior;
// and picks, for a step with B speculating sequences, the k in [0, k_max] that maximises expected
// tokens per second:
//     tokens(k) = B · (1 + a_1 + a_1 a_2 + ... + a_1..a_k)
//     cost(0)   = step + target(B)                              (no drafter, async scheduling)
//     cost(k)   = step + target(B (k + 1)) + draft(B (1 + accepted)) + (k - 1) · draft(B)
// where `step` is what a decode step takes besides its forwards (planning, sampling, events: the
// engine reports it, observe_step_overhead) — paid once per step whatever k, so it favours fewer,
// longer steps: on a small model it is a third of a step.
// keeping k = 0 unless speculation wins by a margin. With k = 0 chosen, the engine runs the step
// without the drafter, so a step that does not speculate costs what it would without speculation.
// Until the first position has been verified kLearnEvidence times, its acceptance is mostly the
// prior: if drafting would pay with every draft accepted, the policy drafts k = 1 to learn it rather
// than judge by the prior alone (a prior below the break-even would otherwise keep drafting off for
// good on a model whose drafts are nearly always right — the demo model on arithmetic: 0.97).
// While speculation is off for low acceptance, one step in `probe_every` drafts again (its MTP
// state warms up first), so a change in traffic is noticed. While it drafts k < k_max, acceptance at
// position k + 1 is only ever seen if it drafts that far: one step in kDeeperEvery drafts k + 1
// until kDeeperEvidence chunks (decayed) have reached that position, so a deeper k that pays is found.
//
// The curves are measured once, at start, perhaps on a host busier or quieter than later, and in
// isolation (the drafter's forwards timed alone, not inside a step). The engine reports what its
// decode steps take (observe_target: the target forward; observe_draft: the drafter's part of a
// drafting step), and each curve is scaled by a running (exponentially weighted, in log space) ratio
// of observed to predicted cost, so the trade between drafting and not follows the host as it is.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace ds {

struct CostPoint {
  int64_t rows = 0;
  double ns = 0;
};

class SpeculationPolicy {
 public:
  // k_max: the configured num_speculative_tokens; prior_acceptance: the per-position acceptance
  // assumed before anything was verified.
  SpeculationPolicy(int32_t k_max, double prior_acceptance = 0.7);

  // Points sorted by rows, at least one each; costs between points are interpolated linearly,
  // beyond the last extrapolated from the last two.
  void set_costs(std::vector<CostPoint> target, std::vector<CostPoint> draft);
  bool has_costs() const { return !target_.empty() && !draft_.empty(); }

  // One verified chunk: n_verified drafts, the first n_accepted of them accepted.
  void record(int32_t n_verified, int32_t n_accepted);

  // A decode step's target forward over `rows` rows (drafts included) took `ns`.
  void observe_target(int64_t rows, double ns);
  // The drafter's work in a step where n_seqs sequences drafted up to k tokens took `ns`.
  void observe_draft(int32_t n_seqs, int32_t k, double ns);
  // A decode step's time besides its target forward and drafter (the step period minus both).
  void observe_step_overhead(double ns);
  double step_overhead_ns() const { return step_overhead_ns_; }
  // Observed / measured cost, as the policy now scales each curve (1 until observed).
  double target_scale() const;
  double draft_scale() const;

  // Drafts per sequence for a step with n_seqs speculating sequences (0: run the step plainly).
  // Calls count as steps for probing.
  int32_t choose(int32_t n_seqs);

  // The model's view, for tests and the bench: expected tokens per ns at k.
  double expected_rate(int32_t n_seqs, int32_t k) const;
  double acceptance(int32_t position) const;  // a_{position+1}, conditional

  static constexpr double kMargin = 1.05;  // speculation must win by 5%
  static constexpr int32_t kProbeEvery = 256;
  static constexpr int32_t kProbeSteps = 8;
  static constexpr int32_t kDeeperEvery = 16;
  static constexpr double kDeeperEvidence = 8.0;
  // Verified chunks (decayed) at position 1 before the estimate, not the prior, decides.
  static constexpr double kLearnEvidence = 8.0;
  static constexpr double kDecay = 0.995;     // per recorded chunk
  static constexpr double kCostLearn = 0.05;  // weight of one observed step in the cost scales
  static constexpr double kMaxScale = 8.0;    // the scales stay within [1/8, 8] of the measured curves

  // ns at `rows` on a cost curve (points sorted by rows, at least one): linear between points,
  // extrapolated from the last two beyond them (one point: proportional).
  static double interpolate(const std::vector<CostPoint>& curve, double rows);

 private:
  int32_t best_k(int32_t n_seqs) const;
  bool would_pay_at(double acceptance, int32_t n_seqs) const;  // best_k > 0 at that acceptance everywhere
  // The measured curves' prediction, unscaled: the drafter's cost for k drafts per sequence.
  double measured_draft_cost(int32_t n_seqs, int32_t k) const;
  double expected_tokens(int32_t k) const;  // 1 + a_1 + a_1 a_2 + ... per sequence

  int32_t k_max_;
  std::vector<CostPoint> target_, draft_;
  std::vector<double> reached_;   // [k_max] decayed count of chunks that verified position j
  std::vector<double> accepted_;  // [k_max] ... and accepted it
  double prior_;
  int64_t steps_off_ = 0;           // consecutive steps chosen 0 while the cost curve alone would draft
  int32_t probe_left_ = 0;          // steps of the probe in progress
  int32_t steps_since_deeper_ = 0;  // drafting steps since the last one that drafted k + 1
  double log_target_scale_ = 0;     // log(observed / measured), exponentially weighted
  double log_draft_scale_ = 0;
  double step_overhead_ns_ = 0;  // exponentially weighted (kCostLearn), 0 until observed
};

}  // namespace ds
