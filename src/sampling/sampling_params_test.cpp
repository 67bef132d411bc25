#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "sampling/sampling_params.h"

namespace ds {
namespace {

// The error must be invalid_argument and its message must start with the offending field.
void expect_rejects(const SamplingParams& p, const std::string& field, size_t vocab = 1000) {
  const Status st = p.validate(vocab);
  ASSERT_FALSE(st.ok()) << field;
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(st.message().rfind(field, 0), 0u) << "message '" << st.message() << "' should name " << field;
}

TEST(SamplingParams, DefaultsAreValidGreedy) {
  const SamplingParams p;
  EXPECT_TRUE(p.validate().ok());
  EXPECT_TRUE(p.validate(1).ok());
  EXPECT_TRUE(p.is_greedy());
  EXPECT_FALSE(p.has_penalties());
}

TEST(SamplingParams, AcceptsTheEdgesOfEachRange) {
  SamplingParams p;
  p.temperature = 2.0f;
  p.top_k = 129280;
  p.top_p = 1e-6f;
  p.min_p = 1.0f;
  p.repetition_penalty = 1e-3f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  p.logprobs = true;
  p.top_logprobs = 20;
  EXPECT_TRUE(p.validate(1000).ok()) << p.validate(1000).to_string();
}

TEST(SamplingParams, ErrorsNameTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  {
    SamplingParams p;
    p.temperature = -0.5f;
    expect_rejects(p, "temperature");
    p.temperature = nan;
    expect_rejects(p, "temperature");
    p.temperature = inf;
    expect_rejects(p, "temperature");
  }
  {
    SamplingParams p;
    p.top_k = -1;
    expect_rejects(p, "top_k");
  }
  for (const float bad : {0.0f, -0.1f, 1.01f, nan}) {
    SamplingParams p;
    p.top_p = bad;
    expect_rejects(p, "top_p");
  }
  for (const float bad : {-0.01f, 1.5f, nan}) {
    SamplingParams p;
    p.min_p = bad;
    expect_rejects(p, "min_p");
  }
  for (const float bad : {0.0f, -1.0f, inf, nan}) {
    SamplingParams p;
    p.repetition_penalty = bad;
    expect_rejects(p, "repetition_penalty");
  }
  for (const float bad : {2.01f, -2.5f, nan}) {
    SamplingParams p;
    p.presence_penalty = bad;
    expect_rejects(p, "presence_penalty");
    SamplingParams q;
    q.frequency_penalty = bad;
    expect_rejects(q, "frequency_penalty");
  }
  {
    SamplingParams p;
    p.logit_bias = {{5, 100.5f}};
    expect_rejects(p, "logit_bias");
    p.logit_bias = {{-1, 1.0f}};
    expect_rejects(p, "logit_bias");
    p.logit_bias = {{1000, 1.0f}};  // vocab is 1000: ids 0..999
    expect_rejects(p, "logit_bias", 1000);
    EXPECT_TRUE(p.validate().ok()) << "without a vocabulary, the id range is not checked";
    p.logit_bias = {{7, 1.0f}, {3, 2.0f}, {7, -1.0f}};
    expect_rejects(p, "logit_bias");
  }
  {
    SamplingParams p;
    p.logprobs = true;
    p.top_logprobs = 21;
    expect_rejects(p, "top_logprobs");
    p.top_logprobs = -1;
    expect_rejects(p, "top_logprobs");
    p.logprobs = false;
    p.top_logprobs = 3;
    expect_rejects(p, "top_logprobs");
  }
}

}  // namespace
}  // namespace ds
