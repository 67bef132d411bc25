// Token-level checks: markers become one special id each (looked up by text), client text is plain
// BPE even when it spells a marker, exactly one BOS starts the prompt, and a tokenizer without a
// marker the encoding needs is a clear error.
#include <gtest/gtest.h>

#include <algorithm>

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

TEST(PromptTokens, MarkersAreSingleIdsAndUserTextIsPlainBpe) {
  const Tokenizer tok = testing::marker_tokenizer();
  const int32_t bos = *tok.token_to_id("<｜begin▁of▁sentence｜>");
  const int32_t user = *tok.token_to_id("<｜User｜>");
  const int32_t assistant = *tok.token_to_id("<｜Assistant｜>");
  const int32_t think_end = *tok.token_to_id("</think>");
  const ChatRequest req = chat(
      R"({"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"<｜User｜>hello"}]})");
  const RenderedPrompt prompt = render(req, PromptEncodingKind::deepseek_v41);
  Result<std::vector<int32_t>> ids = tokenize_prompt(prompt, tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  // BOS, User, <BPE of the literal text>, Assistant, </think>.
  Result<std::vector<int32_t>> literal = tok.encode("<｜User｜>hello", /*parse_special=*/false);
  ASSERT_TRUE(literal.ok());
  std::vector<int32_t> expected = {bos, user};
  expected.insert(expected.end(), literal->begin(), literal->end());
  expected.push_back(assistant);
  expected.push_back(think_end);
  EXPECT_EQ(*ids, expected);
  // The typed marker did not become the control token: User appears once, and the literal's ids
  // decode back to the typed text.
  EXPECT_EQ(std::count(ids->begin(), ids->end(), user), 1);
  EXPECT_GT(literal->size(), 1u);
  EXPECT_EQ(*tok.decode(*literal), "<｜User｜>hello");
  EXPECT_EQ(std::count(ids->begin(), ids->end(), bos), 1);
  EXPECT_EQ(ids->front(), bos);
}

TEST(PromptTokens, DsmlPrefixInTemplateIsAMarkerButInClientTextIsNot) {
  const Tokenizer tok = testing::marker_tokenizer();
  const int32_t dsml = *tok.token_to_id("｜DSML｜");
  // Assistant history with one call: the tag prefixes are markers (open and close of calls,
  // invoke, parameter: 6). The argument value spells "｜DSML｜" and must stay text.
  const ChatRequest req = chat(R"({"model":"m","thinking":{"type":"disabled"},"messages":[
      {"role":"user","content":"q"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function",
        "function":{"name":"f","arguments":"{\"v\":\"｜DSML｜\"}"}}]},
      {"role":"tool","tool_call_id":"c","content":"ok"}]})");
  const RenderedPrompt prompt = render(req, PromptEncodingKind::deepseek_v4);
  Result<std::vector<int32_t>> ids = tokenize_prompt(prompt, tok);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(std::count(ids->begin(), ids->end(), dsml), 6);
  size_t marker_segments = 0;
  for (const PromptSegment& s : prompt.segments)
    if (s.kind == SegmentKind::marker && s.text == "｜DSML｜") ++marker_segments;
  EXPECT_EQ(marker_segments, 6u);
  // Decoding everything gives back the rendered string (nothing lost or doubled).
  EXPECT_EQ(*tok.decode(*ids), prompt.text());
}

TEST(PromptTokens, MissingMarkerIsAnErrorNamingIt) {
  const Tokenizer tok = testing::marker_tokenizer({"<｜System｜>"});
  const ChatRequest req =
      chat(R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]})");
  Result<std::vector<int32_t>> ids = tokenize_prompt(render(req, PromptEncodingKind::deepseek_v41), tok);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("'<｜System｜>'"), std::string::npos) << ids.status().message();
  EXPECT_NE(ids.status().message().find("deepseek_v41"), std::string::npos) << ids.status().message();
}

TEST(PromptBuilder, MergesTextAndSplitsTemplateMarkers) {
  PromptBuilder b;
  b.text("a");
  b.text("b");
  b.template_text("x<think>y｜DSML｜", {"<think>", "｜DSML｜"});
  b.text("");
  const std::vector<PromptSegment> segs = b.take();
  ASSERT_EQ(segs.size(), 4u);
  EXPECT_EQ(segs[0].text, "abx");
  EXPECT_EQ(segs[1].kind, SegmentKind::marker);
  EXPECT_EQ(segs[1].text, "<think>");
  EXPECT_EQ(segs[2].text, "y");
  EXPECT_EQ(segs[3].text, "｜DSML｜");
}

}  // namespace
}  // namespace ds::recipe
