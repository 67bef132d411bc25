// The rejection rule of speculative sampling against the distribution it must reproduce: over many
// seeds, a draft drawn from q and put through accept_or_resample must come out distributed as p
// (chi-square against p computed exactly), for several p/q pairs including disjoint supports; a
// chain of k drafts on a synthetic Markov target must give the exact joint distribution of k + 1
// tokens. Rules that are wrong in the usual ways (resampling from p instead of the residual,
// accepting with p(d) instead of p(d) / q(d)) fail the same check, which is what makes it a test.
#include "sampling/rejection_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "sampling/philox.h"
#include "sampling/sampler.h"

namespace ds {
namespace {

using Dist = std::vector<float>;

Dist normalised(std::vector<double> w) {
  double s = 0;
  for (double x : w) s += x;
  Dist out;
  for (double x : w) out.push_back(static_cast<float>(x / s));
  return out;
}

// Pearson's statistic of observed counts against expected probabilities (cells with p = 0 must be
// empty: any count there is returned as infinity).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    const double e = p[i] * static_cast<double>(n);
    chi2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi2;
}

// Upper tail of chi-square with `df` degrees of freedom at ~1e-6 (Wilson–Hilferty, z = 4.75): a
// correct rule fails with probability ~1e-6 per check, and the draws are keyed, so the outcome is
// fixed for this build anyway.
double chi2_critical(int df) {
  const double k = df;
  const double z = 4.75;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

using Rule = std::function<DraftVerdict(const Dist&, const Dist&, int32_t, double, double)>;

DraftVerdict correct_rule(const Dist& p, const Dist& q, int32_t d, double ua, double ur) {
  static thread_local std::vector<float> scratch;
  return accept_or_resample(p, q, d, ua, ur, scratch);
}
DraftVerdict resample_from_p(const Dist& p, const Dist& q, int32_t d, double ua, double ur) {
  if (ua * q[static_cast<size_t>(d)] < p[static_cast<size_t>(d)]) return {true, d};
  return {false, draw_from(p, ur)};
}
DraftVerdict accept_with_p(const Dist& p, const Dist& q, int32_t d, double ua, double ur) {
  if (ua < p[static_cast<size_t>(d)]) return {true, d};
  std::vector<float> scratch;
  return {false, accept_or_resample(p, q, d, 1.0 - 1e-12, ur, scratch).token};
}

struct OneStep {
  double chi2 = 0;
  double acceptance = 0;
};

OneStep run_one_step(const Dist& p, const Dist& q, const Rule& rule, int64_t n, uint64_t seed_base) {
  std::vector<int64_t> counts(p.size(), 0);
  int64_t accepted = 0;
  for (int64_t s = 0; s < n; ++s) {
    const uint64_t seed = seed_base + static_cast<uint64_t>(s);
    const int32_t d = draw_from(q, philox_uniform(seed, 0, kDraftDrawSlot));
    const DraftVerdict v =
        rule(p, q, d, philox_uniform(seed, 0, kAcceptDrawSlot), philox_uniform(seed, 0, kResampleDrawSlot));
    ++counts[static_cast<size_t>(v.token)];
    accepted += v.accepted ? 1 : 0;
  }
  std::vector<double> pd(p.begin(), p.end());
  return {chi_square(counts, pd, n), static_cast<double>(accepted) / static_cast<double>(n)};
}

struct Pair {
  const char* name;
  Dist p, q;
};

std::vector<Pair> pairs() {
  return {
      {"close", normalised({5, 3, 1, 1, 0.5, 0.5, 2, 1}), normalised({4, 3, 2, 1, 1, 0.2, 2, 1})},
      {"far", normalised({8, 1, 0.5, 0.25, 0.1, 0.05, 0.05, 0.05}),
       normalised({0.05, 0.05, 0.1, 0.25, 0.5, 1, 2, 8})},
      {"q misses tokens of p", normalised({3, 2, 1, 1, 1, 0, 0, 2}), normalised({0, 0, 4, 3, 1, 1, 1, 0})},
      {"p misses tokens of q", normalised({0, 0, 4, 3, 0, 1, 1, 0}), normalised({2, 2, 1, 1, 1, 1, 1, 1})},
      {"equal", normalised({1, 2, 3, 4, 3, 2, 1, 1}), normalised({1, 2, 3, 4, 3, 2, 1, 1})},
  };
}

double overlap(const Dist& p, const Dist& q) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::min(p[i], q[i]);
  return s;
}

int support(const Dist& p) {
  int n = 0;
  for (float x : p) n += x > 0 ? 1 : 0;
  return n;
}

constexpr int64_t kSeeds = 200000;

TEST(RejectionSampling, OutputFollowsTheTargetAndAcceptsTheOverlap) {
  for (const Pair& pq : pairs()) {
    SCOPED_TRACE(pq.name);
    const OneStep r = run_one_step(pq.p, pq.q, correct_rule, kSeeds, 1000);
    EXPECT_LT(r.chi2, chi2_critical(support(pq.p) - 1));
    // Acceptance is 1 - TV(p, q) = sum min(p, q); binomial standard error at n = 2e5 is <= 0.0012.
    EXPECT_NEAR(r.acceptance, overlap(pq.p, pq.q), 0.006);
  }
}

TEST(RejectionSampling, WrongRulesFailTheSameCheck) {
  // The check has power: the usual mistakes move the output off p by far more than the threshold.
  const Pair far = pairs()[1];
  EXPECT_GT(run_one_step(far.p, far.q, resample_from_p, kSeeds, 1000).chi2, 10 * chi2_critical(7));
  EXPECT_GT(run_one_step(far.p, far.q, accept_with_p, kSeeds, 1000).chi2, 10 * chi2_critical(7));
  const Pair close = pairs()[0];
  EXPECT_GT(run_one_step(close.p, close.q, resample_from_p, kSeeds, 1000).chi2, chi2_critical(7));
}

TEST(RejectionSampling, DeterministicForASeed) {
  const Pair pq = pairs()[0];
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const int32_t d = draw_from(pq.q, philox_uniform(seed, 7, kDraftDrawSlot));
    std::vector<float> s1, s2;
    const DraftVerdict a = accept_or_resample(pq.p, pq.q, d, philox_uniform(seed, 7, kAcceptDrawSlot),
                                              philox_uniform(seed, 7, kResampleDrawSlot), s1);
    const DraftVerdict b = accept_or_resample(pq.p, pq.q, d, philox_uniform(seed, 7, kAcceptDrawSlot),
                                              philox_uniform(seed, 7, kResampleDrawSlot), s2);
    EXPECT_EQ(a.accepted, b.accepted);
    EXPECT_EQ(a.token, b.token);
  }
}

TEST(RejectionSampling, DrawFromFollowsTheProbabilities) {
  const Dist p = normalised({0, 1, 2, 0, 4, 1});
  std::vector<int64_t> counts(p.size(), 0);
  for (int64_t s = 0; s < kSeeds; ++s) ++counts[static_cast<size_t>(draw_from(p, philox_uniform(s, 3, 0)))];
  EXPECT_LT(chi_square(counts, std::vector<double>(p.begin(), p.end()), kSeeds), chi2_critical(3));
  EXPECT_EQ(draw_from(p, 0.0), 1);
  EXPECT_EQ(draw_from(p, 0.999999999), 5);
}

// A chain of k drafts as the engine verifies it: a synthetic Markov target p(next | prev) and a
// different draft model q(next | prev); drafts d_1..d_k are drawn from q along their own chain,
// then position j accepts d_j against p(· | token before it) until the first rejection (its
// residual draw ends the step) or, with all k accepted, a bonus token from p. The first k + 1
// output tokens must follow the target's exact joint distribution.
TEST(RejectionSampling, ChainOfDraftsFollowsTheJointTarget) {
  constexpr int V = 4;
  constexpr int kDrafts = 2;
  const std::vector<Dist> p = {normalised({6, 2, 1, 1}), normalised({1, 5, 3, 1}), normalised({2, 2, 2, 4}),
                               normalised({1, 1, 1, 7})};
  const std::vector<Dist> q = {normalised({3, 3, 2, 2}), normalised({4, 1, 4, 1}), normalised({1, 1, 6, 2}),
                               normalised({5, 1, 1, 3})};
  constexpr int32_t kStart = 0;
  std::map<std::vector<int32_t>, int64_t> counts;
  std::vector<float> scratch;
  int64_t n_steps_total = 0;
  for (int64_t s = 0; s < kSeeds; ++s) {
    const uint64_t seed = static_cast<uint64_t>(s) + 77;
    std::vector<int32_t> out;
    int32_t prev = kStart;
    uint64_t pos = 0;
    while (out.size() < kDrafts + 1) {
      ++n_steps_total;
      // Draft along q's own chain, keyed by the output position each draft would take.
      std::vector<int32_t> drafts;
      int32_t x = prev;
      for (int j = 0; j < kDrafts; ++j) {
        x = draw_from(q[static_cast<size_t>(x)], philox_uniform(seed, pos + j, kDraftDrawSlot));
        drafts.push_back(x);
      }
      int32_t context = prev;
      bool all = true;
      for (int j = 0; j < kDrafts; ++j) {
        const uint64_t at = pos + static_cast<uint64_t>(j);
        const Dist& qj = q[static_cast<size_t>(j == 0 ? prev : drafts[static_cast<size_t>(j - 1)])];
        const DraftVerdict v = accept_or_resample(
            p[static_cast<size_t>(context)], qj, drafts[static_cast<size_t>(j)],
            philox_uniform(seed, at, kAcceptDrawSlot), philox_uniform(seed, at, kResampleDrawSlot), scratch);
        out.push_back(v.token);
        context = v.token;
        if (!v.accepted) {
          all = false;
          break;
        }
      }
      if (all)
        out.push_back(draw_from(p[static_cast<size_t>(context)], philox_uniform(seed, pos + kDrafts, 0)));
      pos = out.size();
      prev = out.back();
    }
    out.resize(kDrafts + 1);
    ++counts[out];
  }
  // Exact joint probabilities of the V^(k+1) sequences.
  std::vector<int64_t> observed;
  std::vector<double> expected;
  for (int a = 0; a < V; ++a)
    for (int b = 0; b < V; ++b)
      for (int c = 0; c < V; ++c) {
        expected.push_back(static_cast<double>(p[kStart][static_cast<size_t>(a)]) *
                           p[static_cast<size_t>(a)][static_cast<size_t>(b)] *
                           p[static_cast<size_t>(b)][static_cast<size_t>(c)]);
        const auto it = counts.find({a, b, c});
        observed.push_back(it == counts.end() ? 0 : it->second);
      }
  EXPECT_LT(chi_square(observed, expected, kSeeds), chi2_critical(V * V * V - 1));
  // Speculation did something: fewer steps than tokens.
  EXPECT_LT(n_steps_total, kSeeds * (kDrafts + 1));
}

TEST(RejectionSampling, SamplerDistributionIsWhatSampleDraws) {
  // The p the verifier uses must be the distribution the plain keyed sample draws from, truncation
  // included: sample() at many positions against distribution() on the same row.
  std::vector<float> logits;
  uint32_t x = 99;
  for (int i = 0; i < 40; ++i) {
    x = x * 1664525u + 1013904223u;
    logits.push_back(static_cast<float>((x >> 8) % 1000) / 250.0f);
  }
  for (const SamplingParams& params : {SamplingParams{.temperature = 0.8f, .seed = 5},
                                       SamplingParams{.temperature = 1.3f, .seed = 6, .top_k = 12},
                                       SamplingParams{.temperature = 1.0f, .seed = 7, .top_p = 0.8f},
                                       SamplingParams{.temperature = 0.7f, .seed = 8, .min_p = 0.05f}}) {
    Sampler sampler;
    PenaltyState none;
    std::vector<float> probs(logits.size());
    sampler.distribution(logits, params, none, probs);
    double sum = 0;
    for (const float p : probs) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    std::vector<int64_t> counts(logits.size(), 0);
    constexpr int64_t kDraws = 100000;
    for (int64_t pos = 0; pos < kDraws; ++pos)
      ++counts[static_cast<size_t>(sampler.sample(logits, params, static_cast<uint64_t>(pos)))];
    std::vector<double> expected(probs.begin(), probs.end());
    EXPECT_LT(chi_square(counts, expected, kDraws), chi2_critical(support(probs) - 1))
        << "temperature " << params.temperature << " top_k " << params.top_k << " top_p " << params.top_p;
    // Greedy: a point mass on the argmax.
    sampler.distribution(logits, SamplingParams{}, none, probs);
    EXPECT_EQ(probs[static_cast<size_t>(argmax(logits))], 1.0f);
  }
}

}  // namespace
}  // namespace ds
