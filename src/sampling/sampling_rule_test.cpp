// exp_approx against std::exp (double) as the reference, over the whole range the sampler uses.
#include "sampling/sampling_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ds::sampling_rule {
namespace {

// Tolerance 4 float ulps (relative 4 · 2^-23 = 4.8e-7): Cephes' expf is within about 2 ulp of e^x;
// the margin covers the range reduction's rounding near x = -87. Below -87 the clamp applies.
TEST(ExpApprox, MatchesStdExpWithin4Ulp) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (float x = -87.0f; x <= 0.0f; x += 1.0f / 1024) {
    const double ref = std::exp(static_cast<double>(x));
    const double rel = std::fabs(exp_approx(x) - ref) / ref;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = u(rng);
    const double ref = std::exp(static_cast<double>(x));
    const double rel = std::fabs(exp_approx(x) - ref) / ref;
    if (rel > worst) {
      worst = rel;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 4.0 * 0x1p-23) << "worst relative error at x = " << worst_x;
  EXPECT_EQ(exp_approx(0.0f), 1.0f) << "the top token's weight is exactly 1";
}

TEST(ExpApprox, SurvivorsGetNormalWeightsAndSurvivorBuckets) {
  for (const float x : {-87.0f, -86.99f, -87.5f, -200.0f, -INFINITY, -1e30f}) {
    const float e = exp_approx(x);
    EXPECT_GE(e, 0x1p-126f) << x;
    EXPECT_GE(weight_bucket(e), kMinSurvivorBucket) << x;
  }
  EXPECT_EQ(weight(-INFINITY, 3.0f), 0.0f);
  EXPECT_EQ(weight_bucket(0.0f), 0);
  EXPECT_EQ(weight_bucket(1.0f), 0x3F8);
}

TEST(FixedWeight, ExactSumsAndDrawTarget) {
  EXPECT_EQ(fixed_weight(1.0f), uint64_t{1} << 40);
  EXPECT_EQ(fixed_weight(0.5f), uint64_t{1} << 39);
  EXPECT_EQ(fixed_weight(0x1p-41f), 0u);
  EXPECT_EQ(draw_target(0.0, 1000), 0u);
  EXPECT_EQ(draw_target(0.5, 1000), 500u);
  EXPECT_EQ(draw_target(1.0 - 0x1p-53, 1000), 999u) << "the target stays below the mass";
}

TEST(WeightBucket, IsMonotone) {
  float prev = 0.0f;
  for (float w = 1e-30f; w <= 1.0f; w *= 1.01f) {
    EXPECT_GE(weight_bucket(w), weight_bucket(prev));
    prev = w;
  }
}

}  // namespace
}  // namespace ds::sampling_rule
