#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sampling/penalty_state.h"
#include "sampling/sampler.h"
#include "sampling/sampler_loops.h"
#include "sampling/sampling_params.h"

namespace ds {
namespace {

// Every supported path of the per-ISA loops gives the baseline's bits (rows with NaN, ±inf,
// huge and tiny logits at several temperatures), and a Sampler on each path draws the same tokens.
TEST(SamplerLoops, EveryPathGivesTheBaselineBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 8.0f);
  for (size_t vocab : {size_t{1}, size_t{15}, size_t{17}, size_t{1000}, size_t{129280}}) {
    std::vector<float> row(vocab);
    for (auto& l : row) l = dist(rng);
    if (vocab >= 8) {
      row[1] = std::numeric_limits<float>::quiet_NaN();
      row[2] = -std::numeric_limits<float>::infinity();
      row[3] = 1e30f;
      row[4] = -1e30f;
    }
    const SamplerLoops& base = reference_sampler_loops();
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) {
        std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", isa_name(isa).data());
        continue;
      }
      const SamplerLoops& loops = sampler_loops(isa);
      for (float temperature : {0.3f, 1.0f, 2.5f}) {
        std::vector<float> want(vocab), got(vocab);
        base.weights_of_row(row.data(), want.data(), vocab, temperature, 3.0f);
        loops.weights_of_row(row.data(), got.data(), vocab, temperature, 3.0f);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), vocab * sizeof(float)), 0) << isa_name(isa);
      }
      std::vector<float> want(vocab), got(vocab);
      base.exp_terms(row.data(), want.data(), vocab, 5.0f);
      loops.exp_terms(row.data(), got.data(), vocab, 5.0f);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), vocab * sizeof(float)), 0) << isa_name(isa);
      const double lse_ref = log_sum_exp(Isa::reference, row);
      const double lse = log_sum_exp(isa, row);
      EXPECT_EQ(std::memcmp(&lse_ref, &lse, sizeof lse), 0) << isa_name(isa);
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      p.seed = 42;
      Sampler on_ref(Isa::reference), on_isa(isa);
      for (uint64_t pos = 0; pos < 8; ++pos)
        EXPECT_EQ(on_ref.sample(row, p, pos), on_isa.sample(row, p, pos));
    }
  }
}

std::vector<float> gaussian_logits(size_t vocab, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(vocab);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double m = -INFINITY;
  for (const float l : logits) m = std::max(m, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp((logits[i] - m) / temperature);
  for (double& x : p) x /= total;
  return p;
}

// Draws n = seeds × positions tokens (each (seed, position) pair once) and checks every token's
// frequency against `expected` within 5 binomial sigmas, sqrt(p(1-p)/n) · 5 (plus 1/n for p = 0,
// where the allowed count is 0). The seeds are fixed, so the test is deterministic, not flaky.
void expect_frequencies(const std::vector<float>& logits, SamplingParams params,
                        const std::vector<double>& expected, const std::string& what) {
  Sampler s;
  const PenaltyState none;
  std::vector<int> counts(logits.size(), 0);
  const int n_seeds = 200, n_positions = 200;
  for (int seed = 0; seed < n_seeds; ++seed) {
    params.seed = static_cast<uint64_t>(seed) * 7919u + 1;
    for (int pos = 0; pos < n_positions; ++pos) {
      ++counts[static_cast<size_t>(s.sample(logits, params, none, static_cast<uint64_t>(pos), 0).token_id)];
    }
  }
  const double n = n_seeds * n_positions;
  for (size_t k = 0; k < logits.size(); ++k) {
    const double p = expected[k];
    const double tol = p == 0.0 ? 0.5 / n : 5.0 * std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(counts[k] / n, p, tol) << what << ": token " << k;
  }
}

TEST(SamplerDistribution, TemperatureFollowsSoftmax) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  for (const float t : {0.5f, 1.0f, 1.7f}) {
    SamplingParams p;
    p.temperature = t;
    expect_frequencies(logits, p, softmax(logits, t), "T=" + std::to_string(t));
  }
}

TEST(SamplerDistribution, TopKRenormalisesOverTheKBest) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;  // tokens 3, 5, 0
  const std::vector<float> kept = {1.0f, 2.0f, 1.5f};
  const std::vector<double> pk = softmax(kept, 1.0);
  expect_frequencies(logits, p, {pk[0], 0, 0, pk[1], 0, pk[2]}, "top_k=3");
}

TEST(SamplerDistribution, TopPKeepsTheShortestPrefixReachingP) {
  // probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625
  const float l2 = std::log(2.0f);
  const std::vector<float> logits = {4 * l2, 3 * l2, 2 * l2, l2, l2};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;  // 0.5 < 0.7, 0.75 >= 0.7: keep tokens 0 and 1
  expect_frequencies(logits, p, {2.0 / 3, 1.0 / 3, 0, 0, 0}, "top_p=0.7");
  p.top_p = 0.8f;  // 0.75 < 0.8: the third token crosses it and is kept
  expect_frequencies(logits, p, {4.0 / 7, 2.0 / 7, 1.0 / 7, 0, 0}, "top_p=0.8");
}

TEST(SamplerDistribution, MinPIsRelativeToTheTopProbability) {
  // probabilities 0.5, 0.3, 0.15, 0.05
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;  // threshold 0.1: token 3 goes
  expect_frequencies(logits, p, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, "min_p=0.2");
  p.min_p = 0.35f;  // threshold 0.175: tokens 2 and 3 go
  expect_frequencies(logits, p, {0.5 / 0.8, 0.3 / 0.8, 0, 0}, "min_p=0.35");
}

TEST(Sampler, TopK1AndTinyTopPAreGreedy) {
  Sampler s;
  const PenaltyState none;
  for (uint32_t trial = 0; trial < 20; ++trial) {
    std::vector<float> logits = gaussian_logits(5000, 1.0f, trial);
    if (trial % 2 == 1) logits[100] = logits[4000] = 9.0f;  // a tie: the lower id must win
    const int32_t greedy = argmax(logits);
    if (trial % 2 == 1) {
      ASSERT_EQ(greedy, 100);
    }
    for (uint64_t pos = 0; pos < 10; ++pos) {
      SamplingParams k1;
      k1.temperature = 1.3f;
      k1.top_k = 1;
      k1.seed = trial;
      EXPECT_EQ(s.sample(logits, k1, none, pos, 0).token_id, greedy);
      SamplingParams tiny_p;
      tiny_p.temperature = 1.3f;
      tiny_p.top_p = 1e-6f;
      tiny_p.seed = trial;
      EXPECT_EQ(s.sample(logits, tiny_p, none, pos, 0).token_id, greedy);
      SamplingParams min_p1;  // min_p = 1 keeps only tokens as likely as the top one
      min_p1.temperature = 1.3f;
      min_p1.min_p = 1.0f;
      min_p1.seed = trial;
      const int32_t t = s.sample(logits, min_p1, none, pos, 0).token_id;
      if (trial % 2 == 0) {
        EXPECT_EQ(t, greedy);
      } else {
        EXPECT_TRUE(t == 100 || t == 4000) << "both tied top tokens survive min_p = 1, got " << t;
      }
    }
  }
}

TEST(Sampler, LogitBiasForcesAndForbids) {
  Sampler s;
  const PenaltyState none;
  const std::vector<float> logits = gaussian_logits(1000, 1.0f, 3);
  const int32_t top = argmax(logits);
  const int32_t low = top == 0 ? 1 : 0;
  SamplingParams force;
  force.temperature = 1.0f;
  force.logit_bias = {{low, 100.0f}};
  SamplingParams forbid;
  forbid.temperature = 1.0f;
  forbid.logit_bias = {{top, -100.0f}};
  SamplingParams forbid_greedy = forbid;
  forbid_greedy.temperature = 0.0f;
  int n_top_unbiased = 0;
  for (uint64_t pos = 0; pos < 2000; ++pos) {
    EXPECT_EQ(s.sample(logits, force, none, pos, 0).token_id, low);
    EXPECT_NE(s.sample(logits, forbid, none, pos, 0).token_id, top);
    SamplingParams plain;
    plain.temperature = 1.0f;
    n_top_unbiased += s.sample(logits, plain, none, pos, 0).token_id == top;
  }
  EXPECT_GT(n_top_unbiased, 0) << "without the bias the top token is drawn sometimes";
  EXPECT_NE(s.sample(logits, forbid_greedy, none, 0, 0).token_id, top);
  force.temperature = 0.0f;
  EXPECT_EQ(s.sample(logits, force, none, 0, 0).token_id, low);
}

TEST(Sampler, PenaltiesSteerGreedyChoice) {
  Sampler s;
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  const std::vector<int32_t> prompt = {0};
  const std::vector<int32_t> none = {};
  SamplingParams p;
  EXPECT_EQ(s.sample(logits, p, PenaltyState::from_tokens(prompt, none), 0, 0).token_id, 0);
  p.repetition_penalty = 1.2f;  // 2.0 / 1.2 = 1.67 < 1.9
  EXPECT_EQ(s.sample(logits, p, PenaltyState::from_tokens(prompt, none), 0, 0).token_id, 1);
  SamplingParams q;
  q.presence_penalty = 0.2f;  // presence counts output tokens only: the prompt's 0 is not penalised
  EXPECT_EQ(s.sample(logits, q, PenaltyState::from_tokens(prompt, none), 0, 0).token_id, 0);
  const std::vector<int32_t> output = {0};
  EXPECT_EQ(s.sample(logits, q, PenaltyState::from_tokens(none, output), 0, 0).token_id, 1);
}

// The draw is a pure function of (inputs, seed, position, slot): the order of calls and anything
// sampled in between must not matter.
TEST(Sampler, SameSeedAndPositionGiveSameTokenWhateverRunsInBetween) {
  const std::vector<float> logits = gaussian_logits(129280, 2.0f, 11);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = 1234;
  const PenaltyState none;
  Sampler forward, backward;
  std::vector<int32_t> first(64);
  for (size_t pos = 0; pos < first.size(); ++pos)
    first[pos] = forward.sample(logits, p, none, pos, 0).token_id;
  std::mt19937 rng(1);
  for (size_t i = first.size(); i-- > 0;) {
    // Unrelated work on the same sampler between the calls: another request's row and params.
    SamplingParams other;
    other.temperature = 1.5f;
    other.top_k = 7;
    other.seed = rng();
    backward.sample(gaussian_logits(1000, 1.0f, static_cast<uint32_t>(i)), other, none, i, 3);
    EXPECT_EQ(backward.sample(logits, p, none, i, 0).token_id, first[i]) << "position " << i;
  }
  // The position, seed and draft slot all take part in the key.
  int differ_pos = 0, differ_seed = 0, differ_slot = 0;
  SamplingParams q = p;
  q.seed = 99;
  for (size_t pos = 0; pos < first.size(); ++pos) {
    differ_pos += forward.sample(logits, p, none, pos + 1000, 0).token_id != first[pos];
    differ_seed += forward.sample(logits, q, none, pos, 0).token_id != first[pos];
    differ_slot += forward.sample(logits, p, none, pos, 1).token_id != first[pos];
  }
  EXPECT_GT(differ_pos, 0);
  EXPECT_GT(differ_seed, 0);
  EXPECT_GT(differ_slot, 0);
}

// Chosen logprob = log_softmax(raw logits)[token] computed here in double; top-N is sorted,
// consistent with the chosen one, and its probabilities sum to at most 1.
TEST(SamplerLogprobs, RawModeIsTheModelsLogSoftmax) {
  const std::vector<float> logits = gaussian_logits(129280, 3.0f, 21);
  std::vector<double> lp(logits.size());
  {
    const std::vector<double> p = softmax(logits, 1.0);
    for (size_t i = 0; i < p.size(); ++i) lp[i] = std::log(p[i]);
  }
  Sampler s;
  const std::vector<int32_t> prompt = {5, 6};
  const PenaltyState state = PenaltyState::from_tokens(prompt, prompt);
  for (const float t : {0.0f, 0.8f}) {
    SamplingParams p;
    p.temperature = t;
    p.repetition_penalty = 1.3f;  // raw logprobs ignore processing
    p.logit_bias = {{42, 3.0f}};
    p.logprobs = true;
    p.top_logprobs = 20;
    for (uint64_t pos = 0; pos < 20; ++pos) {
      const SampleResult r = s.sample(logits, p, state, pos, 0);
      ASSERT_TRUE(r.logprob.has_value());
      // float logprobs of magnitude <= ~30: a few float ulps plus the float-exp sum's error.
      const double expected = lp[static_cast<size_t>(r.token_id)];
      EXPECT_NEAR(*r.logprob, expected, 1e-5 + 1e-6 * std::fabs(expected));
      ASSERT_EQ(r.n_top, 20);
      double mass = 0.0;
      for (int i = 0; i < r.n_top; ++i) {
        const TokenLogprob& e = r.top[static_cast<size_t>(i)];
        EXPECT_NEAR(e.logprob, lp[static_cast<size_t>(e.token_id)], 1e-5);
        if (i > 0) {
          EXPECT_GE(r.top[static_cast<size_t>(i - 1)].logprob, e.logprob);
        }
        mass += std::exp(static_cast<double>(e.logprob));
      }
      EXPECT_LE(mass, 1.0 + 1e-6);  // slack: float rounding of 20 logprobs
      // Every token outside the top-N is no more likely than its last entry.
      const float last = r.top[19].logprob;
      EXPECT_LE(lp[static_cast<size_t>(argmax(logits))], r.top[0].logprob + 1e-5);
      if (*r.logprob > last + 1e-5) {
        bool listed = false;
        for (int i = 0; i < r.n_top; ++i) listed |= r.top[static_cast<size_t>(i)].token_id == r.token_id;
        EXPECT_TRUE(listed) << "a chosen token more likely than the 20th must be in the top list";
      }
    }
  }
}

TEST(SamplerLogprobs, ProcessedModeIsTheDrawnDistribution) {
  // probabilities 0.5, 0.3, 0.15, 0.05; min_p 0.2 keeps the first three, renormalised by 0.95.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler s;
  const PenaltyState none;
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;
  p.logprobs = true;
  p.top_logprobs = 4;
  p.logprobs_mode = LogprobsMode::processed;
  const std::vector<double> expected = {std::log(0.5 / 0.95), std::log(0.3 / 0.95), std::log(0.15 / 0.95)};
  for (uint64_t pos = 0; pos < 50; ++pos) {
    const SampleResult r = s.sample(logits, p, none, pos, 0);
    ASSERT_LT(r.token_id, 3);
    EXPECT_NEAR(*r.logprob, expected[static_cast<size_t>(r.token_id)], 1e-6);
    ASSERT_EQ(r.n_top, 3) << "only survivors are listed";
    double mass = 0.0;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(r.top[static_cast<size_t>(i)].token_id, i);
      EXPECT_NEAR(r.top[static_cast<size_t>(i)].logprob, expected[static_cast<size_t>(i)], 1e-6);
      mass += std::exp(static_cast<double>(r.top[static_cast<size_t>(i)].logprob));
    }
    EXPECT_NEAR(mass, 1.0, 1e-6);  // all survivors listed: the whole distribution
  }
  // At temperature 0 the processed distribution is log_softmax of the biased logits.
  SamplingParams g;
  g.logprobs = true;
  g.logprobs_mode = LogprobsMode::processed;
  g.logit_bias = {{3, std::log(10.0f)}};  // 0.05 · 10 = 0.5: weights 0.5, 0.3, 0.15, 0.5 over 1.45
  const SampleResult r = s.sample(logits, g, none, 0, 0);
  EXPECT_EQ(r.token_id, 0) << "a tie goes to the lower id";
  EXPECT_NEAR(*r.logprob, std::log(0.5 / 1.45), 1e-6);
}

TEST(SamplerLogprobs, NotRequestedMeansNotComputed) {
  Sampler s;
  const PenaltyState none;
  SamplingParams p;
  p.temperature = 1.0f;
  const SampleResult r = s.sample(gaussian_logits(100, 1.0f, 0), p, none, 0, 0);
  EXPECT_FALSE(r.logprob.has_value());
  EXPECT_EQ(r.n_top, 0);
}

TEST(Sampler, DegenerateRows) {
  Sampler s;
  const PenaltyState none;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  for (uint64_t pos = 0; pos < 50; ++pos) {
    // +inf tokens share the mass; NaN and -inf are never drawn.
    const int32_t t = s.sample(std::vector<float>{nan, inf, 0.0f, inf, -inf}, p, none, pos, 0).token_id;
    EXPECT_TRUE(t == 1 || t == 3) << t;
    EXPECT_EQ(s.sample(std::vector<float>{-inf, nan, 5.0f}, p, none, pos, 0).token_id, 2);
  }
  EXPECT_EQ(s.sample(std::vector<float>{7.0f}, p, none, 0, 0).token_id, 0);
  EXPECT_EQ(s.sample(std::vector<float>{-inf, -inf}, p, none, 0, 0).token_id, 0) << "nothing can be drawn";
}

}  // namespace
}  // namespace ds
