// Token checks on the real DeepSeek-V3 tokenizer.json (models/, recreated by CI; the `model` tier):
// the ids come from the file, never from this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "recipe/encoding.h"
#include "recipe/prompt.h"
#include "recipe/recipe_test_util.h"

namespace ds::recipe {
namespace {

using testing::chat;

RenderedPrompt render(const ChatRequest& req, PromptEncodingKind kind) {
  EncodingOptions options;
  options.kind = kind;
  Result<RenderedPrompt> r = render_prompt(req, options);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : RenderedPrompt{};
}

Tokenizer real_v3_tokenizer() {
  Result<Tokenizer> tok = Tokenizer::load(DS_DEFAULT_TOKENIZER_DIR);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

TEST(PromptTokensRealV3, EmptyUserMessageIsBosUserAssistant) {
  if (!std::filesystem::exists(std::string(DS_DEFAULT_TOKENIZER_DIR) + "/tokenizer.json"))
    GTEST_SKIP() << "no tokenizer under " << DS_DEFAULT_TOKENIZER_DIR;
  const Tokenizer tok = real_v3_tokenizer();
  ConversionOptions v3;
  v3.default_thinking = false;
  const ChatRequest req = chat(R"({"model":"m","messages":[{"role":"user","content":""}]})", v3);
  Result<std::vector<int32_t>> ids = tokenize_prompt(render(req, PromptEncodingKind::deepseek_v3), tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(*ids,
            (std::vector<int32_t>{*tok.token_to_id("<｜begin▁of▁sentence｜>"), *tok.token_to_id("<｜User｜>"),
                                  *tok.token_to_id("<｜Assistant｜>")}));
  EXPECT_EQ(ids->front(), tok.bos_id());
}

TEST(PromptTokensRealV3, TypedMarkerIsSplitByBpe) {
  if (!std::filesystem::exists(std::string(DS_DEFAULT_TOKENIZER_DIR) + "/tokenizer.json"))
    GTEST_SKIP() << "no tokenizer under " << DS_DEFAULT_TOKENIZER_DIR;
  const Tokenizer tok = real_v3_tokenizer();
  const int32_t user = *tok.token_to_id("<｜User｜>");
  ConversionOptions v3;
  v3.default_thinking = false;
  const ChatRequest req = chat(R"({"model":"m","messages":[{"role":"user","content":"<｜User｜>"}]})", v3);
  Result<std::vector<int32_t>> ids = tokenize_prompt(render(req, PromptEncodingKind::deepseek_v3), tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  // BOS, User, then the literal as several BPE pieces, then Assistant.
  ASSERT_GT(ids->size(), 4u);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), user), 1);
  const std::vector<int32_t> literal(ids->begin() + 2, ids->end() - 1);
  EXPECT_EQ(*tok.decode(literal), "<｜User｜>");
  // A V4.1 prompt needs <｜System｜>, which the V3 tokenizer lacks.
  const ChatRequest v41 = chat(R"({"model":"m","messages":[{"role":"user","content":"q"}]})");
  Result<std::vector<int32_t>> bad = tokenize_prompt(render(v41, PromptEncodingKind::deepseek_v41), tok);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("<｜System｜>"), std::string::npos) << bad.status().message();
}

// The real V3 tokenizer.json with the V4/V4.1 markers it lacks appended as special tokens at new ids
// (the BPE is V3's; whether V4's 128k merges equal V3's is an open point of the model spec).
Tokenizer real_v3_plus_v4_markers() {
  std::ifstream in(std::string(DS_DEFAULT_TOKENIZER_DIR) + "/tokenizer.json");
  nlohmann::json root = nlohmann::json::parse(in);
  int32_t next_id = 0;
  for (const auto& t : root["added_tokens"]) next_id = std::max(next_id, t["id"].get<int32_t>() + 1);
  for (const char* marker : {"<｜System｜>", "<｜latest_reminder｜>", "<think>", "</think>", "｜DSML｜"}) {
    bool present = false;
    for (const auto& t : root["added_tokens"]) present = present || t["content"] == marker;
    if (present) continue;
    root["added_tokens"].push_back({{"id", next_id++},
                                    {"content", marker},
                                    {"single_word", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"special", true}});
  }
  Result<Tokenizer> tok = Tokenizer::from_json(root.dump(), "", "v3+v4-markers");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

TEST(PromptTokensRealV3, V41CountsQuotedByTheSpec) {
  if (!std::filesystem::exists(std::string(DS_DEFAULT_TOKENIZER_DIR) + "/tokenizer.json"))
    GTEST_SKIP() << "no tokenizer under " << DS_DEFAULT_TOKENIZER_DIR;
  const Tokenizer tok = real_v3_plus_v4_markers();
  // Features spec §10.2 rule 9: an empty user message in non-thinking mode is 4 ids (BOS, User,
  // Assistant, </think>), and "<｜User｜>" as content is 5 BPE ids.
  const ChatRequest empty =
      chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":""}]})");
  Result<std::vector<int32_t>> ids = tokenize_prompt(render(empty, PromptEncodingKind::deepseek_v41), tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(*ids,
            (std::vector<int32_t>{*tok.token_to_id("<｜begin▁of▁sentence｜>"), *tok.token_to_id("<｜User｜>"),
                                  *tok.token_to_id("<｜Assistant｜>"), *tok.token_to_id("</think>")}));
  const ChatRequest typed = chat(
      R"({"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"<｜User｜>"}]})");
  ids = tokenize_prompt(render(typed, PromptEncodingKind::deepseek_v41), tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(ids->size(), 4u + 5u);
}

}  // namespace
}  // namespace ds::recipe
