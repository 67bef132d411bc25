#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/philox.h"
#include "sampling/sampler.h"

namespace ds {
namespace {

// Known-answer vectors of Random123's kat_vectors for philox4x32_10.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformIsKeyedAndInRange) {
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = philox_uniform(7, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    EXPECT_EQ(u, philox_uniform(7, static_cast<uint64_t>(i)));  // pure function of the key
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);  // mean of U[0,1), 5 sigma = 5·(1/√12)/√20000 ≈ 0.01
  EXPECT_NE(philox_uniform(7, 3), philox_uniform(8, 3));
  EXPECT_NE(philox_uniform(7, 3), philox_uniform(7, 4));
  EXPECT_NE(philox_uniform(7, 3, 0), philox_uniform(7, 3, 1));
  EXPECT_NE(philox_uniform(7, 1ull << 32), philox_uniform(7, 0));  // high position word counts
}

TEST(Sampler, GreedyPicksArgmaxLowestIndexOnTies) {
  Sampler s;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {0.5f, 2.0f, nan, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(logits, SamplingParams{0.0f, 123}, 0), 1);
  EXPECT_EQ(argmax(std::vector<float>{nan, -3.0f, -2.0f}), 2);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
}

TEST(Sampler, ValidatesTemperature) {
  EXPECT_TRUE((SamplingParams{0.0f, 0}.validate().ok()));
  EXPECT_TRUE((SamplingParams{0.7f, 0}.validate().ok()));
  EXPECT_FALSE((SamplingParams{-0.1f, 0}.validate().ok()));
  EXPECT_FALSE((SamplingParams{std::numeric_limits<float>::infinity(), 0}.validate().ok()));
  EXPECT_FALSE((SamplingParams{std::numeric_limits<float>::quiet_NaN(), 0}.validate().ok()));
}

// Empirical frequencies over many positions follow softmax(logits / T).
void expect_distribution(float temperature, const std::vector<float>& logits,
                         const std::vector<double>& probs) {
  Sampler s;
  std::vector<int> counts(logits.size(), 0);
  const int n = 60000;
  for (int i = 0; i < n; ++i)
    ++counts[static_cast<size_t>(s.sample(logits, SamplingParams{temperature, 42}, i))];
  for (size_t k = 0; k < logits.size(); ++k) {
    // 5 sigma of a binomial proportion with p <= 0.5 over 60000 draws is 0.0102.
    EXPECT_NEAR(static_cast<double>(counts[k]) / n, probs[k], 0.0102)
        << "token " << k << " T=" << temperature;
  }
}

TEST(Sampler, FollowsSoftmaxOfScaledLogits) {
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f);
  expect_distribution(1.0f, {0.0f, ln2, ln3}, {1.0 / 6, 2.0 / 6, 3.0 / 6});
  expect_distribution(0.5f, {0.0f, ln2}, {0.2, 0.8});              // weights 1 : 2²
  expect_distribution(2.0f, {0.0f, 2 * ln2}, {1.0 / 3, 2.0 / 3});  // weights 1 : 4^½
}

TEST(Sampler, NeverPicksMinusInfAndIsDeterministic) {
  Sampler a, b;
  std::vector<float> logits = {-INFINITY, 1.0f, -INFINITY, 1.0f, -INFINITY};
  bool saw1 = false, saw3 = false;
  for (int i = 0; i < 200; ++i) {
    const int32_t t = a.sample(logits, SamplingParams{1.0f, 9}, i);
    ASSERT_TRUE(t == 1 || t == 3) << t;
    saw1 |= t == 1;
    saw3 |= t == 3;
    EXPECT_EQ(t, b.sample(logits, SamplingParams{1.0f, 9}, i));
  }
  EXPECT_TRUE(saw1 && saw3);
}

}  // namespace
}  // namespace ds
