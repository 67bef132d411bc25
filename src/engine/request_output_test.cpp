// RequestOutput without a model: scripted tokens through the stop conditions, detokenization and
// event assembly (tiny byte-level tokenizer: byte b is id 3 + b, "</s>" = 1).
#include "engine/request_output.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds {
namespace {

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = [] {
    Result<Tokenizer> t = Tokenizer::from_json(testing::tiny_tokenizer_json(), "", "tiny");
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return std::move(t).value();
  }();
  return tok;
}

std::vector<int32_t> byte_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(testing::tiny_byte_id(c));
  return ids;
}

SampleResult sample(int32_t id, float logprob = 0.0f) {
  SampleResult r;
  r.token_id = id;
  r.logprob = logprob;
  r.top[0] = TokenLogprob{id, logprob};
  r.n_top = 1;
  return r;
}

Request make_request(int32_t max_tokens) {
  Request r;
  r.prompt_tokens = {5, 6, 7};
  r.stop.max_tokens = max_tokens;
  return r;
}

const std::vector<int32_t> kEos = {1};

TEST(RequestOutput, MaxTokensEndsWithLengthAndEveryTokenIsReported) {
  const Request req = make_request(3);
  RequestOutput out(7, req, &tiny_tokenizer(), kEos);
  const std::vector<int32_t> ids = byte_ids("abc");
  EXPECT_EQ(out.add_token(sample(ids[0])), FinishReason::none);
  std::optional<TokenEvent> e1 = out.take_event();
  ASSERT_TRUE(e1.has_value());
  EXPECT_EQ(e1->request_id, 7u);
  EXPECT_EQ(e1->tokens, std::vector<int32_t>{ids[0]});
  EXPECT_EQ(e1->text, "a");
  EXPECT_FALSE(e1->finished);
  EXPECT_FALSE(out.take_event().has_value()) << "nothing new to report";
  EXPECT_EQ(out.add_token(sample(ids[1])), FinishReason::none);
  EXPECT_EQ(out.add_token(sample(ids[2])), FinishReason::length);
  std::optional<TokenEvent> e2 = out.take_event();
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(e2->tokens, (std::vector<int32_t>{ids[1], ids[2]}));
  EXPECT_EQ(e2->text, "bc");
  EXPECT_TRUE(e2->finished);
  EXPECT_EQ(e2->finish_reason, FinishReason::length);
  EXPECT_EQ(e2->usage.prompt_tokens, 3);
  EXPECT_EQ(e2->usage.completion_tokens, 3);
  EXPECT_FALSE(out.take_event().has_value()) << "nothing after the final event";
}

TEST(RequestOutput, EosAndStopTokenIdsEndWithStopAndAreNotReported) {
  Request req = make_request(10);
  req.stop.stop_token_ids = {testing::tiny_byte_id('z')};
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  EXPECT_EQ(out.add_token(sample(testing::tiny_byte_id('a'))), FinishReason::none);
  EXPECT_EQ(out.add_token(sample(testing::tiny_byte_id('z'))), FinishReason::stop);
  std::optional<TokenEvent> e = out.take_event();
  ASSERT_TRUE(e && e->finished);
  EXPECT_EQ(e->tokens, std::vector<int32_t>{testing::tiny_byte_id('a')});
  EXPECT_EQ(e->text, "a");
  EXPECT_EQ(e->usage.completion_tokens, 2) << "the stop token was generated";

  RequestOutput eos(2, req, &tiny_tokenizer(), kEos);
  EXPECT_EQ(eos.add_token(sample(1)), FinishReason::stop);
  std::optional<TokenEvent> e2 = eos.take_event();
  ASSERT_TRUE(e2 && e2->finished);
  EXPECT_TRUE(e2->tokens.empty());

  req.stop.ignore_eos = true;
  RequestOutput ignoring(3, req, &tiny_tokenizer(), kEos);
  EXPECT_EQ(ignoring.add_token(sample(1)), FinishReason::none) << "ignore_eos";
}

TEST(RequestOutput, StopStringSplitOverTokensCutsTextAndLaterTokens) {
  Request req = make_request(20);
  req.stop.stop_strings = {"lo w"};
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  const std::vector<int32_t> ids = byte_ids("hello world");
  std::string text;
  // Two tokens per "step" and events in between: the stop string completes at 'w' (index 6), and
  // the token after it ('o', same step) must not be reported.
  std::vector<int32_t> reported;
  bool finished = false;
  for (size_t i = 0; i < ids.size() && !finished; i += 2) {
    for (size_t j = i; j < i + 2 && j < ids.size() && !out.finished(); ++j) out.add_token(sample(ids[j]));
    std::optional<TokenEvent> e = out.take_event();
    if (!e) continue;
    text += e->text;
    reported.insert(reported.end(), e->tokens.begin(), e->tokens.end());
    finished = e->finished;
    if (finished) {
      EXPECT_EQ(e->finish_reason, FinishReason::stop);
      EXPECT_EQ(e->usage.completion_tokens, 7);
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(text, "hel");
  EXPECT_EQ(reported, std::vector<int32_t>(ids.begin(), ids.begin() + 7));
}

TEST(RequestOutput, StopStringOnTheLastAllowedTokenIsAStop) {
  Request req = make_request(3);
  req.stop.stop_strings = {"bc"};
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  for (int32_t id : byte_ids("abc")) out.add_token(sample(id));
  std::optional<TokenEvent> e = out.take_event();
  ASSERT_TRUE(e && e->finished);
  EXPECT_EQ(e->finish_reason, FinishReason::stop);
  EXPECT_EQ(e->text, "a");
}

TEST(RequestOutput, HeldBackPrefixOfAStopStringIsFlushedAtTheEnd) {
  Request req = make_request(2);
  req.stop.stop_strings = {"xyz"};
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  out.add_token(sample(testing::tiny_byte_id('a')));
  std::optional<TokenEvent> e1 = out.take_event();
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1->text, "a");
  out.add_token(sample(testing::tiny_byte_id('x')));  // could start "xyz": held back, then length
  std::optional<TokenEvent> e2 = out.take_event();
  ASSERT_TRUE(e2 && e2->finished);
  EXPECT_EQ(e2->finish_reason, FinishReason::length);
  EXPECT_EQ(e2->text, "x");
}

TEST(RequestOutput, SplitUtf8CharacterIsHeldUntilComplete) {
  Request req = make_request(10);
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  const std::vector<int32_t> ids = byte_ids("\xC3\xA9!");  // é!
  out.add_token(sample(ids[0]));
  std::optional<TokenEvent> e1 = out.take_event();
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1->tokens.size(), 1u) << "the token is reported at once";
  EXPECT_EQ(e1->text, "") << "half a character is not";
  out.add_token(sample(ids[1]));
  out.add_token(sample(ids[2]));
  std::optional<TokenEvent> e2 = out.take_event();
  ASSERT_TRUE(e2);
  EXPECT_EQ(e2->text, "\xC3\xA9!");
}

TEST(RequestOutput, LogprobsFollowTheReportedTokens) {
  Request req = make_request(10);
  req.sampling.logprobs = true;
  req.sampling.top_logprobs = 1;
  req.stop.stop_token_ids = {testing::tiny_byte_id('z')};
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  out.add_token(sample(testing::tiny_byte_id('a'), -0.5f));
  out.add_token(sample(testing::tiny_byte_id('b'), -1.5f));
  out.add_token(sample(testing::tiny_byte_id('z'), -2.5f));
  std::optional<TokenEvent> e = out.take_event();
  ASSERT_TRUE(e && e->finished);
  ASSERT_EQ(e->chosen_logprobs.size(), 2u) << "none for the stop token";
  EXPECT_EQ(e->chosen_logprobs[0].token_id, testing::tiny_byte_id('a'));
  EXPECT_EQ(e->chosen_logprobs[0].logprob, -0.5f);
  EXPECT_EQ(e->chosen_logprobs[1].logprob, -1.5f);
  ASSERT_EQ(e->top_logprobs.size(), 2u);
  EXPECT_EQ(e->top_logprobs[1].size(), 1u);
}

TEST(RequestOutput, FinishFromOutsideKeepsTheFirstReason) {
  const Request req = make_request(10);
  RequestOutput out(1, req, &tiny_tokenizer(), kEos);
  out.add_token(sample(testing::tiny_byte_id('a')));
  out.finish(FinishReason::cancelled);
  out.finish(FinishReason::error, Status(ErrorCode::internal, "late"));
  std::optional<TokenEvent> e = out.take_event();
  ASSERT_TRUE(e && e->finished);
  EXPECT_EQ(e->finish_reason, FinishReason::cancelled);
  EXPECT_TRUE(e->error.ok());
  EXPECT_EQ(e->text, "a") << "text before the cancel is still delivered";
}

TEST(RequestOutput, WithoutTokenizerOnlyTokensAreReported) {
  const Request req = make_request(2);
  RequestOutput out(1, req, nullptr, kEos);
  out.add_token(sample(42));
  out.add_token(sample(43));
  std::optional<TokenEvent> e = out.take_event();
  ASSERT_TRUE(e && e->finished);
  EXPECT_EQ(e->tokens, (std::vector<int32_t>{42, 43}));
  EXPECT_EQ(e->text, "");
}

TEST(RequestOutput, StopStringLimitsAreValidated) {
  StopConditions ok;
  ok.stop_strings = {"a", "bc"};
  EXPECT_TRUE(RequestOutput::validate_stop_strings(ok).ok());
  StopConditions empty_string;
  empty_string.stop_strings = {""};
  EXPECT_FALSE(RequestOutput::validate_stop_strings(empty_string).ok());
  StopConditions too_long;
  too_long.stop_strings = {std::string(RequestOutput::kMaxStopStringBytes + 1, 'a')};
  EXPECT_FALSE(RequestOutput::validate_stop_strings(too_long).ok());
}

}  // namespace
}  // namespace ds
