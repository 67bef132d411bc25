// SpeculationPolicy on synthetic cost curves: drafts when rows are cheap and acceptance high, turns
// down to fewer drafts and then none as the step becomes compute-bound or acceptance falls, and
// probes again after a while when acceptance (not cost) turned it off; learns the acceptance first
// when the prior alone would keep it off.
#include "engine/speculation_policy.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds {
namespace {

// A step costs a fixed overhead plus a per-row cost; the MTP layer a quarter of that.
std::vector<CostPoint> curve(double fixed_ns, double per_row_ns, int64_t max_rows) {
  std::vector<CostPoint> c;
  for (int64_t r = 1; r <= max_rows; r *= 2) c.push_back({r, fixed_ns + per_row_ns * static_cast<double>(r)});
  return c;
}

void set_overhead_bound(SpeculationPolicy& p) {
  // Overhead dominated up to ~16 rows, then linear: verifying 4 rows of 1 sequence is nearly free,
  // 64 rows of 16 sequences is not.
  p.set_costs(curve(1e6, 2e4, 256), curve(2.5e5, 5e3, 256));
}

TEST(SpeculationPolicy, DraftsWhenRowsAreCheapAndAcceptanceHigh) {
  SpeculationPolicy p(3, 0.8);
  set_overhead_bound(p);
  EXPECT_EQ(p.choose(1), 3);
  EXPECT_GT(p.expected_rate(1, 3), 1.4 * p.expected_rate(1, 0));
}

TEST(SpeculationPolicy, TurnsDownWhenComputeBound) {
  SpeculationPolicy p(3, 0.8);
  // Cost proportional to rows (no fixed part): k + 1 rows per sequence cost k + 1 times as much,
  // while they yield fewer than k + 1 tokens: never worth it.
  p.set_costs(curve(0, 1e5, 512), curve(0, 2.5e4, 512));
  for (const int32_t b : {1, 4, 16, 64}) EXPECT_EQ(p.choose(b), 0) << b;
  // Mixed: cheap at one sequence, linear at many.
  SpeculationPolicy q(3, 0.8);
  q.set_costs(curve(1e6, 1e5, 512), curve(2.5e5, 2.5e4, 512));
  EXPECT_GT(q.choose(1), 0);
  EXPECT_EQ(q.choose(64), 0);
  int32_t last = 3;
  for (const int32_t b : {1, 2, 4, 8, 16, 32, 64}) {  // monotone: more sequences, no more drafts
    const int32_t k = q.choose(b);
    EXPECT_LE(k, last) << b;
    last = k;
  }
}

TEST(SpeculationPolicy, ObservedStepCostsRescaleTheMeasuredCurves) {
  SpeculationPolicy p(3, 0.8);
  set_overhead_bound(p);
  ASSERT_EQ(p.choose(1), 3);
  // A target step costing what the curve says leaves its scale at 1.
  for (int i = 0; i < 50; ++i) p.observe_target(4, SpeculationPolicy::interpolate(curve(1e6, 2e4, 256), 4));
  EXPECT_NEAR(p.target_scale(), 1.0, 1e-12);
  // The drafter turns out far costlier inside real steps than its calibration: drafting stops.
  for (int i = 0; i < 200; ++i) p.observe_draft(1, 3, 1e9);
  EXPECT_NEAR(p.draft_scale(), SpeculationPolicy::kMaxScale, 1e-9);  // bounded
  EXPECT_EQ(p.choose(1), 0);
  // ... and cheap again: drafting resumes.
  for (int i = 0; i < 400; ++i) p.observe_draft(1, 3, 1.0);
  EXPECT_NEAR(p.draft_scale(), 1.0 / SpeculationPolicy::kMaxScale, 1e-9);
  EXPECT_EQ(p.choose(1), 3);
  // A target that costs 4x its curve: one observation moves its scale by kCostLearn of the log
  // ratio, and drafting (whose cost did not move) pays relatively more.
  SpeculationPolicy q(3, 0.8);
  set_overhead_bound(q);
  q.observe_target(2, 4 * SpeculationPolicy::interpolate(curve(1e6, 2e4, 256), 2));
  EXPECT_NEAR(std::log(q.target_scale()), SpeculationPolicy::kCostLearn * std::log(4.0), 1e-9);
  SpeculationPolicy r(3, 0.8);
  set_overhead_bound(r);
  EXPECT_GT(q.expected_rate(1, 3) / q.expected_rate(1, 0), r.expected_rate(1, 3) / r.expected_rate(1, 0));
}

TEST(SpeculationPolicy, IgnoresObservationsItCannotUse) {
  SpeculationPolicy none(3, 0.8);  // no cost curve: nothing to scale
  none.observe_target(4, 1e6);
  none.observe_draft(1, 3, 1e6);
  EXPECT_EQ(none.target_scale(), 1.0);
  EXPECT_EQ(none.draft_scale(), 1.0);
  SpeculationPolicy p(3, 0.8);
  set_overhead_bound(p);
  p.observe_target(0, 1e6);
  p.observe_target(4, 0);
  p.observe_target(4, std::nan(""));
  p.observe_draft(0, 3, 1e6);
  p.observe_draft(1, 0, 1e6);
  p.observe_draft(1, 3, -5);
  EXPECT_EQ(p.target_scale(), 1.0);
  EXPECT_EQ(p.draft_scale(), 1.0);
}

TEST(SpeculationPolicy, AcceptanceIsMeasuredPerPosition) {
  SpeculationPolicy p(3, 0.5);
  for (int i = 0; i < 2000; ++i) p.record(3, i % 2 == 0 ? 3 : 1);  // pos 0 always, pos 1 half, pos 2 all
  EXPECT_NEAR(p.acceptance(0), 1.0, 0.02);
  EXPECT_NEAR(p.acceptance(1), 0.5, 0.03);
  EXPECT_NEAR(p.acceptance(2), 1.0, 0.05);  // half as many chunks reach it: the prior weighs more
}

TEST(SpeculationPolicy, LowAcceptanceTurnsItOffAndAProbeLooksAgain) {
  SpeculationPolicy p(3, 0.8);
  set_overhead_bound(p);
  ASSERT_EQ(p.choose(1), 3);
  for (int i = 0; i < 2000; ++i) p.record(3, 0);  // nothing accepted
  EXPECT_EQ(p.choose(1), 0);
  int32_t probes = 0;
  for (int i = 0; i < SpeculationPolicy::kProbeEvery * 2; ++i) probes += p.choose(1) > 0 ? 1 : 0;
  EXPECT_GT(probes, 0);
  EXPECT_LE(probes, 2 * SpeculationPolicy::kProbeSteps);
  // Acceptance back: speculation resumes.
  for (int i = 0; i < 2000; ++i) p.record(1, 1);
  EXPECT_GT(p.choose(1), 0);
}

TEST(SpeculationPolicy, LearnsTheAcceptanceBeforeJudgingByThePrior) {
  // The demo model's start-up curve (1 thread): a 2-row verify costs 1.4x a step, a draft row 0.28x.
  // At the prior (0.7) k = 1 is below the break-even; with every draft accepted it pays.
  const auto costs = [](SpeculationPolicy& p) {
    p.set_costs({{1, 143e3}, {2, 202e3}, {3, 268e3}, {4, 315e3}},
                {{1, 40e3}, {2, 48e3}, {3, 59e3}, {4, 72e3}});
  };
  SpeculationPolicy good(3, 0.7);
  costs(good);
  ASSERT_LT(good.expected_rate(1, 1), good.expected_rate(1, 0));  // judged by the prior: off
  EXPECT_EQ(good.choose(1), 1);                                   // but it drafts to learn
  for (int i = 0; i < 12; ++i) good.record(1, 1);                 // nearly every draft right
  EXPECT_GT(good.choose(1), 0);                                   // now by the estimate: on
  EXPECT_GT(good.acceptance(0), 0.85);

  SpeculationPolicy bad(3, 0.7);
  costs(bad);
  EXPECT_EQ(bad.choose(1), 1);
  for (int i = 0; i < 12; ++i) bad.record(1, 0);  // drafts rejected: off once learnt
  EXPECT_EQ(bad.choose(1), 0);

  // Where even accepted drafts do not pay (cost proportional to rows), nothing is tried.
  SpeculationPolicy bound(3, 0.7);
  bound.set_costs(curve(0, 1e5, 512), curve(0, 2.5e4, 512));
  EXPECT_EQ(bound.choose(1), 0);
}

TEST(SpeculationPolicy, AStepsFixedOverheadFavoursFewerLongerSteps) {
  // Forward cost proportional to rows: never worth it on forwards alone. A fixed overhead per step
  // (planning, sampling) as large as a row changes that at high acceptance: 2 tokens for 1 overhead.
  SpeculationPolicy p(3, 0.95);
  p.set_costs(curve(0, 1e5, 512), curve(0, 1e4, 512));
  EXPECT_EQ(p.choose(1), 0);
  EXPECT_EQ(p.step_overhead_ns(), 0);
  for (int i = 0; i < 200; ++i) p.observe_step_overhead(1e5);
  EXPECT_NEAR(p.step_overhead_ns(), 1e5, 1);
  EXPECT_GT(p.expected_rate(1, 1), 1.05 * p.expected_rate(1, 0));
  EXPECT_GT(p.choose(1), 0);
  p.observe_step_overhead(-5);  // a clock oddity: ignored
  EXPECT_NEAR(p.step_overhead_ns(), 1e5, 1);
}

TEST(SpeculationPolicy, DraftsOneDeeperNowAndThenToMeasureTheNextPosition) {
  // Drafting costs enough that k = 2 pays only if the second draft is accepted far more often than
  // the prior says; drafting k = 1 alone would never find out.
  SpeculationPolicy p(3, 0.7);
  p.set_costs(curve(1e6, 2e4, 256), curve(6e5, 5e3, 256));
  for (int i = 0; i < 500; ++i) p.record(1, 1);
  int32_t deeper = 0;
  for (int i = 0; i < 4 * SpeculationPolicy::kDeeperEvery; ++i) {
    const int32_t k = p.choose(1);
    ASSERT_TRUE(k == 1 || k == 2) << k;
    deeper += k == 2 ? 1 : 0;
  }
  EXPECT_EQ(deeper, 4);  // one step in kDeeperEvery
  // Those steps show the second draft is accepted: k = 2 now wins on its own.
  for (int i = 0; i < 50; ++i) p.record(2, 2);
  EXPECT_EQ(p.choose(1), 2);
  // Enough evidence at the next position, and it is bad: no deeper steps.
  SpeculationPolicy q(3, 0.7);
  q.set_costs(curve(1e6, 2e4, 256), curve(6e5, 5e3, 256));
  for (int i = 0; i < 500; ++i) q.record(2, 1);  // the second draft always rejected
  for (int i = 0; i < 4 * SpeculationPolicy::kDeeperEvery; ++i) EXPECT_EQ(q.choose(1), 1);
}

TEST(SpeculationPolicy, WithoutCostsAlwaysDrafts) {
  SpeculationPolicy p(2);
  EXPECT_EQ(p.choose(1), 2);
  EXPECT_EQ(p.choose(100), 2);
  EXPECT_EQ(p.choose(0), 0);
}

}  // namespace
}  // namespace ds
