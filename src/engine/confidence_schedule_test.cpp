#include "engine/confidence_schedule.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

// ns = fixed + per_row · rows, as two points (interpolated and extrapolated linearly).
std::vector<CostPoint> linear_cost(double fixed, double per_row) {
  return {{1, fixed + per_row}, {64, fixed + 64 * per_row}};
}

TEST(ConfidenceSchedule, AFlatCurveVerifiesEveryDraftThatMaySurvive) {
  const std::vector<std::vector<float>> c{{0.9f, 0.5f, 0.2f}, {0.7f, 0.0f, 0.9f}, {}};
  EXPECT_EQ(schedule_by_confidence(c, 0, linear_cost(1000, 0)), (std::vector<int32_t>{3, 1, 0}));
}

TEST(ConfidenceSchedule, ACostPerRowCutsTheUnlikelyDrafts) {
  // Purely compute-bound (ns ∝ rows): a draft pays only if it survives more often than the current
  // tokens per row (1 at the start), which no draft does.
  const std::vector<std::vector<float>> one{{0.9f, 0.5f, 0.2f}};
  EXPECT_EQ(schedule_by_confidence(one, 0, linear_cost(0, 10)), (std::vector<int32_t>{0}));
  // Mostly fixed cost: all three pay (1.9/102 < 2.35/103 < 2.44/104 of 1/101).
  EXPECT_EQ(schedule_by_confidence(one, 0, linear_cost(100, 1)), (std::vector<int32_t>{3}));
  // In between (ns = 100 + 30·rows): A's two likely drafts pay (2.9/190, 3.71/220), B's 0.3 would
  // lower the rate (4.01/250), so the walk stops there.
  const std::vector<std::vector<float>> two{{0.9f, 0.9f}, {0.3f}};
  EXPECT_EQ(schedule_by_confidence(two, 0, linear_cost(100, 30)), (std::vector<int32_t>{2, 0}));
  // The step's other rows count: with 200 more rows each draft is cheap next to the step.
  EXPECT_EQ(schedule_by_confidence(two, 200, linear_cost(100, 30)), (std::vector<int32_t>{2, 1}));
}

TEST(ConfidenceSchedule, DraftsJoinInDescendingSurvivalAcrossSequences) {
  // Survivals A .6, .36 and B .95, .475, taken in the order B1, A1, B2, A2. With ns = 100 + 60·rows:
  // start 2/220 = .00909; + B1 2.95/280 = .01054; + A1 3.55/340 = .01044 is worse: stop.
  const std::vector<std::vector<float>> c{{0.6f, 0.6f}, {0.95f, 0.5f}};
  EXPECT_EQ(schedule_by_confidence(c, 0, linear_cost(100, 60)), (std::vector<int32_t>{0, 1}));
  // A cheaper row (ns = 100 + 20·rows) takes three: 2/140 < 2.95/160 < 3.55/180 < 4.025/200, and
  // A2 (4.385/220 = .01993 < .02013) is where the walk stops.
  EXPECT_EQ(schedule_by_confidence(c, 0, linear_cost(100, 20)), (std::vector<int32_t>{1, 2}));
}

TEST(ConfidenceSchedule, TheFullWalkPassesACliffThatStopsAlgorithm1) {
  // A step that costs 100 ns up to 2 rows and 200 from 3 rows on (a cliff, then flat): Algorithm 1
  // stops at the cliff after one draft (1.9/100, then 2.71/200 is worse); the production variant's
  // walk goes on and finds 5 drafts better (4.69/200 = .0234 > .019).
  const std::vector<CostPoint> cliff{{1, 100}, {2, 100}, {3, 200}, {8, 200}};
  const std::vector<std::vector<float>> c{{0.9f, 0.9f, 0.9f, 0.9f, 0.9f}};
  EXPECT_EQ(schedule_by_confidence(c, 0, cliff), (std::vector<int32_t>{1}));
  EXPECT_EQ(capacity_by_confidence(c, 0, cliff), 5);
  // Nothing pays on a purely compute-bound curve.
  EXPECT_EQ(capacity_by_confidence(c, 0, linear_cost(0, 10)), 0);
}

TEST(ConfidenceSchedule, TopKTakesTheMostLikelyDraftsAsPrefixes) {
  // Survivals A .6, .36 and B .95, .475: the order B1, A1, B2, A2.
  const std::vector<std::vector<float>> c{{0.6f, 0.6f}, {0.95f, 0.5f}, {}};
  EXPECT_EQ(top_by_confidence(c, 0), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(top_by_confidence(c, 1), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(top_by_confidence(c, 3), (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(top_by_confidence(c, 10), (std::vector<int32_t>{2, 2, 0}));
}

TEST(ConfidenceScheduler, Algorithm1CountsTheStepsOtherRows) {
  // ns = 100 + 30·rows: alone, B's 0.3 draft does not pay; beside 200 prefill rows it does.
  const std::vector<std::vector<float>> two{{0.9f, 0.9f}, {0.3f}};
  ConfidenceScheduler scheduler(linear_cost(100, 30), /*delayed=*/false);
  ASSERT_TRUE(scheduler.active());
  EXPECT_EQ(scheduler.lengths(two, 0), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(scheduler.lengths(two, 200), (std::vector<int32_t>{2, 1}));
  ConfidenceScheduler inactive;
  EXPECT_FALSE(inactive.active());
  EXPECT_EQ(inactive.lengths(two, 0), (std::vector<int32_t>{2, 1}));
}

TEST(ConfidenceScheduler, DelayedTakesTheCapacityOfTwoStepsBack) {
  // The cliff curve: 100 ns up to 2 rows, 200 from 3. Five drafts of 0.9 have capacity 5 (the full
  // walk passes the cliff); a step whose sequence drafted nothing, 0.
  const std::vector<CostPoint> cliff{{1, 100}, {2, 100}, {3, 200}, {8, 200}};
  const std::vector<std::vector<float>> likely{{0.9f, 0.9f, 0.9f, 0.9f, 0.9f}};
  const std::vector<std::vector<float>> none{{}};
  ConfidenceScheduler scheduler(cliff, /*delayed=*/true);
  // The first two steps: Algorithm 1 (it stops at the cliff after one draft).
  EXPECT_EQ(scheduler.lengths(likely, 0), (std::vector<int32_t>{1}));
  EXPECT_EQ(scheduler.lengths(none, 0), (std::vector<int32_t>{0}));
  // Third step: the first step's capacity (5); fourth: the second's (0).
  EXPECT_EQ(scheduler.lengths(likely, 0), (std::vector<int32_t>{5}));
  EXPECT_EQ(scheduler.lengths(likely, 0), (std::vector<int32_t>{0}));
}

TEST(ConfidenceScheduler, DelayedCapacitiesCountTheStepsOtherRows) {
  // One draft of 0.1 on the cliff curve: alone it rides the flat part (1.1/100 > 1/100, capacity
  // 1); beside one more row it would cross the cliff (1.1/200 < 1/100, capacity 0).
  const std::vector<CostPoint> cliff{{1, 100}, {2, 100}, {3, 200}, {8, 200}};
  const std::vector<std::vector<float>> unlikely{{0.1f}};
  for (const int64_t other_rows : {0, 1}) {
    ConfidenceScheduler scheduler(cliff, /*delayed=*/true);
    (void)scheduler.lengths(unlikely, other_rows);
    (void)scheduler.lengths(unlikely, other_rows);
    EXPECT_EQ(scheduler.lengths(unlikely, other_rows), (std::vector<int32_t>{other_rows == 0 ? 1 : 0}))
        << other_rows;
  }
}

}  // namespace
}  // namespace ds
