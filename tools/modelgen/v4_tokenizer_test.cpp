// add_template_markers (v4_tokenizer.h) on the tiny tokenizer fixture: id choice, idempotence,
// limits, the config file, and the result loaded by the real Tokenizer.
#include "v4_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tiny_tokenizer_fixture.h"
#include "tokenizer/tokenizer.h"

namespace ds::modelgen {
namespace {

using nlohmann::json;

// The fixture has <think> at 301 and <|user|> at 300; ids 0..268 are vocab. Slot 310 holds a
// placeholder, as V3's 128798 / 128799 do.
std::string fixture_with_placeholder() {
  json tok = json::parse(ds::testing::tiny_tokenizer_json());
  tok["added_tokens"].push_back({{"id", 310},
                                 {"content", "<｜place▁holder▁no▁310｜>"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  return tok.dump();
}

constexpr V4Marker kTestMarkers[] = {
    {"<think>", 7},                 // already a token (301): kept where it is
    {"</think>", 310},              // known id on a placeholder: takes the slot
    {"｜DSML｜", 300},              // known id taken by another token: next free id
    {"<｜latest_reminder｜>", -1},  // unknown id: next free id
};

std::string config_json() {
  return R"({"add_bos_token": true, "bos_token": "<s>", "eos_token": "</s>",
             "chat_template": "{{ v3 }}", "added_tokens_decoder": {"0": {"content": "<s>"}}})";
}

TEST(V4Tokenizer, MarkersGetKnownOrNextIdsAndLoadAsSingleTokens) {
  const Result<TokenizerFiles> files =
      add_template_markers(fixture_with_placeholder(), config_json(), kTestMarkers, 512, "fixture");
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, files->config_json, "derived");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->token_to_id("<think>"), 301);
  EXPECT_EQ(tok->token_to_id("</think>"), 310);
  EXPECT_EQ(tok->token_to_id("｜DSML｜"), 311);
  EXPECT_EQ(tok->token_to_id("<｜latest_reminder｜>"), 312);
  EXPECT_FALSE(tok->token_to_id("<｜place▁holder▁no▁310｜>").has_value());
  EXPECT_EQ(tok->vocab_size(), 313);
  for (const V4Marker& m : kTestMarkers) {
    SCOPED_TRACE(std::string(m.content));
    const int32_t id = *tok->token_to_id(m.content);
    // Recognised in template text, plain BPE otherwise.
    const Result<std::vector<int32_t>> special = tok->encode(m.content, /*parse_special=*/true);
    ASSERT_TRUE(special.ok());
    EXPECT_EQ(*special, std::vector<int32_t>{id});
    const Result<std::vector<int32_t>> plain = tok->encode(m.content, /*parse_special=*/false);
    ASSERT_TRUE(plain.ok());
    EXPECT_GT(plain->size(), 1u);
    // Not special: the engine's output decoding (special tokens skipped) keeps the marker text,
    // which the output parser needs.
    EXPECT_FALSE(tok->is_special(id));
    const std::vector<int32_t> one{id};
    EXPECT_EQ(*tok->decode(one, /*skip_special=*/true), m.content);
  }
  const json cfg = json::parse(files->config_json);
  EXPECT_FALSE(cfg.contains("chat_template"));
  EXPECT_EQ(cfg["added_tokens_decoder"]["310"]["content"], "</think>");
  EXPECT_EQ(cfg["added_tokens_decoder"]["312"]["special"], false);
  EXPECT_FALSE(cfg["added_tokens_decoder"].contains("301"));  // <think> was there already
  // added_tokens stay in id order.
  const json derived = json::parse(files->tokenizer_json);
  for (size_t i = 1; i < derived["added_tokens"].size(); ++i)
    EXPECT_LT(derived["added_tokens"][i - 1]["id"], derived["added_tokens"][i]["id"]);
}

TEST(V4Tokenizer, DerivingTwiceChangesNothing) {
  const Result<TokenizerFiles> once =
      add_template_markers(fixture_with_placeholder(), config_json(), kTestMarkers, 512, "fixture");
  ASSERT_TRUE(once.ok());
  const Result<TokenizerFiles> twice =
      add_template_markers(once->tokenizer_json, once->config_json, kTestMarkers, 512, "fixture");
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(json::parse(twice->tokenizer_json), json::parse(once->tokenizer_json));
  EXPECT_EQ(json::parse(twice->config_json), json::parse(once->config_json));
}

TEST(V4Tokenizer, IdsOutsideTheVocabAreRefused) {
  // 312 is the last id needed: vocab_size 312 is one short.
  const Result<TokenizerFiles> files =
      add_template_markers(fixture_with_placeholder(), config_json(), kTestMarkers, 312, "fixture");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(files.status().message().find("<｜latest_reminder｜>"), std::string::npos);
  EXPECT_NE(files.status().message().find("312"), std::string::npos);
  EXPECT_TRUE(
      add_template_markers(fixture_with_placeholder(), config_json(), kTestMarkers, 313, "fixture").ok());
}

TEST(V4Tokenizer, NotATokenizerJsonIsAnError) {
  for (const char* text : {"{}", "[]", "not json", R"({"added_tokens": [], "model": {}})",
                           R"({"added_tokens": [{"id": "x", "content": "a"}], "model": {"vocab": {}}})"}) {
    SCOPED_TRACE(text);
    const Result<TokenizerFiles> files = add_template_markers(text, "{}", kTestMarkers, 512, "dir");
    ASSERT_FALSE(files.ok());
    EXPECT_NE(files.status().message().find("dir/tokenizer.json"), std::string::npos);
  }
  const Result<TokenizerFiles> bad_cfg =
      add_template_markers(fixture_with_placeholder(), "nope", kTestMarkers, 512, "dir");
  ASSERT_FALSE(bad_cfg.ok());
  EXPECT_NE(bad_cfg.status().message().find("dir/tokenizer_config.json"), std::string::npos);
}

}  // namespace
}  // namespace ds::modelgen
