// Shape sweep: the fast Sampler against reference_sample (full sort, double log-softmax) over vocab
// sizes, logit shapes (flat, peaked, ties, NaN/±inf) and parameter combinations. The token and the
// top-N ids must be identical: both follow the same arithmetic (sampling_rule.h), so any difference
// is a bug in the partial selection, not rounding. Logprobs may differ by the fast path's float exp
// (raw mode): tolerance 2e-5 + 1e-6·|lp|, a few float ulps at the magnitudes seen here (|lp| < 60).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sampling/penalty_state.h"
#include "sampling/reference_sampler.h"
#include "sampling/sampler.h"

namespace ds {
namespace {

enum class Shape { flat, peaked, ties, specials };

std::vector<float> make_logits(size_t vocab, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, shape == Shape::peaked ? 6.0f : 1.0f);
  std::vector<float> v(vocab);
  for (float& x : v) x = d(rng);
  if (shape == Shape::ties) {
    for (float& x : v) x = std::round(x * 2.0f) / 2.0f;  // many equal logits
  }
  if (shape == Shape::specials && vocab >= 4) {
    std::uniform_int_distribution<size_t> at(0, vocab - 1);
    for (size_t i = 0; i < vocab / 4 + 1; ++i) v[at(rng)] = -std::numeric_limits<float>::infinity();
    v[at(rng)] = std::numeric_limits<float>::quiet_NaN();
    if (seed % 3 == 0) v[at(rng)] = std::numeric_limits<float>::infinity();
  }
  return v;
}

std::string describe(const SamplingParams& p, size_t vocab, int shape, uint64_t pos) {
  std::ostringstream os;
  os << "vocab=" << vocab << " shape=" << shape << " pos=" << pos << " T=" << p.temperature
     << " top_k=" << p.top_k << " top_p=" << p.top_p << " min_p=" << p.min_p
     << " rep=" << p.repetition_penalty
     << " mode=" << (p.logprobs_mode == LogprobsMode::raw ? "raw" : "processed");
  return os.str();
}

void expect_same(const SampleResult& fast, const SampleResult& ref, const std::string& where) {
  ASSERT_EQ(fast.token_id, ref.token_id) << where;
  ASSERT_EQ(fast.logprob.has_value(), ref.logprob.has_value()) << where;
  const auto close = [](float a, float b) {
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::fabs(a - b) <= 2e-5 + 1e-6 * std::fabs(b);
  };
  if (fast.logprob) {
    EXPECT_TRUE(close(*fast.logprob, *ref.logprob))
        << where << ": " << *fast.logprob << " vs " << *ref.logprob;
  }
  ASSERT_EQ(fast.n_top, ref.n_top) << where;
  for (int i = 0; i < fast.n_top; ++i) {
    const TokenLogprob& f = fast.top[static_cast<size_t>(i)];
    const TokenLogprob& r = ref.top[static_cast<size_t>(i)];
    EXPECT_EQ(f.token_id, r.token_id) << where << " top[" << i << "]";
    EXPECT_TRUE(close(f.logprob, r.logprob))
        << where << " top[" << i << "]: " << f.logprob << " vs " << r.logprob;
  }
}

TEST(SamplerVsReference, ShapeSweep) {
  Sampler fast;  // one sampler for the whole sweep: buffer reuse across sizes is part of the test
  const std::vector<int32_t> prompt = {0, 3, 3, 17, 500};
  const std::vector<int32_t> output = {3, 9, 9, 9, 1000, 70000};
  const PenaltyState state = PenaltyState::from_tokens(prompt, output);
  const PenaltyState none;
  int n_cases = 0;
  for (const size_t vocab : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{256}, size_t{1500}}) {
    for (const Shape shape : {Shape::flat, Shape::peaked, Shape::ties, Shape::specials}) {
      const std::vector<float> logits =
          make_logits(vocab, shape, static_cast<uint32_t>(vocab * 7 + static_cast<int>(shape)));
      for (const float t : {0.0f, 0.6f, 1.0f, 2.5f}) {
        for (const int32_t k : {0, 1, 5, 50}) {
          for (const float top_p : {1.0f, 0.9f, 0.3f}) {
            for (const float min_p : {0.0f, 0.05f}) {
              for (const bool penalties : {false, true}) {
                SamplingParams p;
                p.temperature = t;
                p.top_k = k;
                p.top_p = top_p;
                p.min_p = min_p;
                p.seed = vocab + static_cast<uint64_t>(k);
                if (penalties) {
                  p.repetition_penalty = 1.3f;
                  p.presence_penalty = 0.4f;
                  p.frequency_penalty = -0.3f;
                  if (vocab > 2) p.logit_bias = {{1, 2.0f}, {static_cast<int32_t>(vocab - 1), -5.0f}};
                }
                p.logprobs = true;
                p.top_logprobs = 5;
                p.logprobs_mode = (n_cases % 2 == 0) ? LogprobsMode::raw : LogprobsMode::processed;
                const PenaltyState& st = penalties ? state : none;
                for (uint64_t pos = 0; pos < 2; ++pos) {
                  const std::string where = describe(p, vocab, static_cast<int>(shape), pos);
                  expect_same(fast.sample(logits, p, st, pos, 0), reference_sample(logits, p, st, pos, 0),
                              where);
                  if (HasFatalFailure()) return;
                }
                ++n_cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(n_cases, 1000);
}

// The full DeepSeek-V3 vocabulary, where buckets hold thousands of tokens: a flat row (the draw
// lands deep in the histogram) and a peaked one, with and without top-k / top-p, 3 positions each
// (the reference's full sort costs ~0.1 s per call, so this is kept small).
TEST(SamplerVsReference, FullVocabulary) {
  Sampler fast;
  const PenaltyState none;
  for (const Shape shape : {Shape::flat, Shape::peaked}) {
    const std::vector<float> logits = make_logits(129280, shape, 77 + static_cast<uint32_t>(shape));
    for (const float top_p : {1.0f, 0.9f}) {
      for (const int32_t k : {0, 50}) {
        SamplingParams p;
        p.temperature = 1.0f;
        p.top_p = top_p;
        p.top_k = k;
        p.seed = 5;
        p.logprobs = true;
        p.top_logprobs = 20;
        p.logprobs_mode = k == 0 ? LogprobsMode::processed : LogprobsMode::raw;
        for (uint64_t pos = 0; pos < 3; ++pos) {
          expect_same(fast.sample(logits, p, none, pos, 0), reference_sample(logits, p, none, pos, 0),
                      describe(p, logits.size(), static_cast<int>(shape), pos));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ds
