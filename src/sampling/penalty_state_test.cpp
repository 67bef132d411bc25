#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sampling/logits_processors.h"
#include "sampling/penalty_state.h"

namespace ds {
namespace {

TEST(PenaltyState, CountsOutputAndRemembersPrompt) {
  const std::vector<int32_t> prompt = {4, 1, 4};
  PenaltyState s;
  s.add_prompt_tokens(prompt);
  s.add_output_token(7);
  s.add_output_token(1);
  s.add_output_token(7);
  EXPECT_TRUE(s.seen(4));
  EXPECT_TRUE(s.seen(1));
  EXPECT_TRUE(s.seen(7));
  EXPECT_FALSE(s.seen(2));
  EXPECT_EQ(s.output_count(7), 2u);
  EXPECT_EQ(s.output_count(1), 1u);
  EXPECT_EQ(s.output_count(4), 0u) << "prompt tokens are not output counts";
  EXPECT_EQ(s.n_output_tokens(), 3u);
  EXPECT_EQ(std::vector<int32_t>(s.seen_token_ids().begin(), s.seen_token_ids().end()),
            (std::vector<int32_t>{4, 1, 7}));
  EXPECT_EQ(std::vector<int32_t>(s.output_token_ids().begin(), s.output_token_ids().end()),
            (std::vector<int32_t>{7, 1}));
}

// A preempted request recomputes its state from (prompt, output so far): it must be identical to
// the state built one token at a time.
TEST(PenaltyState, RebuildEqualsIncremental) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, 40);
  std::vector<int32_t> prompt(30), output;
  for (int32_t& t : prompt) t = id(rng);
  PenaltyState incremental;
  incremental.add_prompt_tokens(prompt);
  for (int step = 0; step < 200; ++step) {
    const int32_t t = id(rng);
    incremental.add_output_token(t);
    output.push_back(t);
    if (step % 17 == 0) {
      EXPECT_EQ(PenaltyState::from_tokens(prompt, output), incremental) << "step " << step;
    }
  }
  EXPECT_EQ(PenaltyState::from_tokens(prompt, output), incremental);
  output.push_back(41);
  EXPECT_FALSE(PenaltyState::from_tokens(prompt, output) == incremental);
}

// Hand-computed: bias first, then repetition (l > 0 divided, else multiplied) over prompt ∪ output,
// then frequency·count + presence over output. All values are dyadic, so exact in float.
TEST(LogitsProcessors, HandComputedExample) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, 1.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {3, 3, 2};
  const PenaltyState state = PenaltyState::from_tokens(prompt, output);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{0, 1.0f}, {4, -0.5f}};
  ASSERT_TRUE(has_logit_edits(p, state));
  apply_bias_and_penalties(logits, p, state);
  EXPECT_EQ(logits[0], 1.5f);   // (2 + 1) / 2
  EXPECT_EQ(logits[1], -2.0f);  // -1 · 2
  EXPECT_EQ(logits[2], -0.5f);  // 0.5 / 2 - 0.25·1 - 0.5
  EXPECT_EQ(logits[3], 0.5f);   // 3 / 2 - 0.25·2 - 0.5
  EXPECT_EQ(logits[4], -0.5f);  // 0 - 0.5, never seen
  EXPECT_EQ(logits[5], 1.0f);   // untouched
}

TEST(LogitsProcessors, NegativePenaltiesEncourageAndOutOfVocabIdsAreSkipped) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> prompt = {};
  const std::vector<int32_t> output = {1, 1, 9};  // 9 is outside this row
  const PenaltyState state = PenaltyState::from_tokens(prompt, output);
  SamplingParams p;
  p.presence_penalty = -1.0f;
  p.frequency_penalty = -0.5f;
  apply_bias_and_penalties(logits, p, state);
  EXPECT_EQ(logits[0], 1.0f);
  EXPECT_EQ(logits[1], 3.0f);  // 1 + 0.5·2 + 1
  EXPECT_EQ(logits[2], 1.0f);
}

TEST(LogitsProcessors, NeutralParamsChangeNothing) {
  const std::vector<int32_t> prompt = {0, 1, 2};
  const PenaltyState state = PenaltyState::from_tokens(prompt, prompt);
  const SamplingParams p;
  EXPECT_FALSE(has_logit_edits(p, state));
  std::vector<float> logits = {0.3f, -0.7f, 2.5f};
  const std::vector<float> before = logits;
  apply_bias_and_penalties(logits, p, state);
  EXPECT_EQ(logits, before);
}

}  // namespace
}  // namespace ds
