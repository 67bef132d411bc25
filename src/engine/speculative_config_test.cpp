#include "engine/speculative_config.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(SpeculativeConfig, ParsesVllmShape) {
  Result<SpeculativeConfig> c = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 3})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->method, SpeculativeMethod::mtp);
  EXPECT_EQ(c->num_speculative_tokens, 3);
  EXPECT_TRUE(c->enabled());
  EXPECT_TRUE(parse_speculative_config(R"({"num_speculative_tokens": 1, "method": "deepseek_mtp"})").ok());
  EXPECT_FALSE(SpeculativeConfig{}.enabled());
  EXPECT_TRUE(c->adaptive);
  EXPECT_EQ(c->draft_sampling, DraftSampling::greedy);
  EXPECT_EQ(c->draft_vocab, -1);
  Result<SpeculativeConfig> d = parse_speculative_config(
      R"({"method": "mtp", "num_speculative_tokens": 2, "adaptive": false, "draft_sampling": "sampled",
          "draft_vocab": 0})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FALSE(d->adaptive);
  EXPECT_EQ(d->draft_sampling, DraftSampling::sampled);
  EXPECT_EQ(d->draft_vocab, 0);
  Result<SpeculativeConfig> e = parse_speculative_config(
      R"({"method": "dspark", "num_speculative_tokens": 5, "confidence_scheduling": true})");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->method, SpeculativeMethod::dspark);
  EXPECT_TRUE(e->confidence_scheduling);
  EXPECT_FALSE(e->confidence_delayed);
  EXPECT_FALSE(d->confidence_scheduling);
  Result<SpeculativeConfig> f = parse_speculative_config(
      R"({"method": "dspark", "num_speculative_tokens": 5, "confidence_scheduling": true,
          "confidence_capacity": "two_steps_back"})");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->confidence_delayed);
}

TEST(SpeculativeConfig, RefusesBadInputWithOneLineNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"method\": \"mtp\"", "not valid JSON"},
      {"[3]", "must be a JSON object"},
      {R"({"num_speculative_tokens": 3})", "\"method\" is missing"},
      {R"({"method": "mtp"})", "\"num_speculative_tokens\" is missing"},
      {R"({"method": 3, "num_speculative_tokens": 3})", "\"method\" must be a string"},
      {R"({"method": "eagle", "num_speculative_tokens": 3})", "\"eagle\" is not supported"},
      {R"({"method": "mtp", "num_speculative_tokens": 3, "confidence_scheduling": true})",
       "\"confidence_scheduling\" needs \"method\": \"dspark\""},
      {R"({"method": "dspark", "num_speculative_tokens": 3, "confidence_scheduling": "on"})",
       "\"confidence_scheduling\" must be true or false"},
      {R"({"method": "dspark", "num_speculative_tokens": 3, "confidence_capacity": "two_steps_back"})",
       "\"confidence_capacity\" needs \"confidence_scheduling\": true"},
      {R"({"method": "dspark", "num_speculative_tokens": 3, "confidence_scheduling": true,
           "confidence_capacity": "later"})",
       "\"confidence_capacity\" must be \"fresh\" or \"two_steps_back\""},
      {R"({"method": "mtp", "num_speculative_tokens": 0})", "must be in [1, 16], got 0"},
      {R"({"method": "mtp", "num_speculative_tokens": 17})", "got 17"},
      {R"({"method": "mtp", "num_speculative_tokens": 2.5})", "must be an integer"},
      {R"({"method": "mtp", "num_speculative_tokens": 2, "model": "x"})", "unknown key \"model\""},
      {R"({"method": "mtp", "num_speculative_tokens": 2, "adaptive": 1})",
       "\"adaptive\" must be true or false"},
      {R"({"method": "mtp", "num_speculative_tokens": 2, "draft_sampling": "top"})",
       "\"draft_sampling\" must be"},
      {R"({"method": "mtp", "num_speculative_tokens": 2, "draft_vocab": -3})", "\"draft_vocab\" must be"},
  };
  for (const auto& [json, want] : cases) {
    Result<SpeculativeConfig> c = parse_speculative_config(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), ErrorCode::invalid_argument) << json;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << json << " -> " << c.status().message();
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << "one line";
    EXPECT_EQ(c.status().message().rfind("--speculative-config: ", 0), 0u) << c.status().message();
  }
}

}  // namespace
}  // namespace ds
