#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/regex_translation.h"
#include "tokenizer/tiny_tokenizer_fixture.h"
#include "tokenizer/tokenizer_spec.h"

namespace ds {
namespace {

// The DeepSeek-V3 Split regexes, as written in the fixture (copied from the real tokenizer.json).
std::vector<std::string> deepseek_patterns() {
  Result<TokenizerSpec> spec = parse_tokenizer_json(testing::tiny_tokenizer_json(), "fixture");
  EXPECT_TRUE(spec.ok());
  return spec->split_patterns;
}

std::vector<std::string> split(const PreTokenizer& pre, std::string_view text) {
  RegexScratch scratch;
  std::vector<std::string_view> pieces, work;
  EXPECT_TRUE(pre.split(text, scratch, pieces, work).ok());
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, DeepSeekSplits) {
  Result<PreTokenizer> pre = PreTokenizer::build(deepseek_patterns(), "fixture");
  ASSERT_TRUE(pre.ok()) << pre.status().to_string();
  EXPECT_EQ(split(*pre, "Hello world"), Pieces({"Hello", " world"}));
  EXPECT_EQ(split(*pre, "1234567"), Pieces({"123", "456", "7"}));  // digits in threes
  EXPECT_EQ(split(*pre, "a   b"), Pieces({"a", "  ", " b"}));      // \s+(?!\S) leaves one space
  EXPECT_EQ(split(*pre, "x\r\n\r\ny"), Pieces({"x", "\r\n\r\n", "y"}));
  EXPECT_EQ(split(*pre, "I'm here."), Pieces({"I", "'m", " here", "."}));
  EXPECT_EQ(split(*pre, "中文abc日本語"), Pieces({"中文", "abc", "日本語"}));  // CJK split out first
  EXPECT_EQ(split(*pre, "ok!!\n\nnext"), Pieces({"ok", "!!\n\n", "next"}));
  EXPECT_EQ(split(*pre, ""), Pieces({}));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpaceOnly) {
  Result<PreTokenizer> pre = PreTokenizer::build(deepseek_patterns(), "fixture");
  ASSERT_TRUE(pre.ok());
  // U+180E is not White_Space (PCRE2's own \s would take it): it stays with the letter after it.
  EXPECT_EQ(split(*pre, "a\u180Eb"), Pieces({"a", "\u180Eb"}));
  // U+3000 ideographic space is White_Space.
  EXPECT_EQ(split(*pre, "a\u3000\u3000b"), Pieces({"a", "\u3000", "\u3000b"}));
}

TEST(PreTokenizer, NewerUnicodeCharactersKeepTheirClass) {
  Result<PreTokenizer> pre = PreTokenizer::build(deepseek_patterns(), "fixture");
  ASSERT_TRUE(pre.ok());
  // U+1FABF (goose, Unicode 15: So) joins a leading space like any symbol; U+13460 (Egyptian
  // hieroglyph, Unicode 16: Lo) joins it like any letter.
  EXPECT_EQ(split(*pre, "a \U0001FABF"), Pieces({"a", " \U0001FABF"}));
  EXPECT_EQ(split(*pre, "a \U00013460"), Pieces({"a", " \U00013460"}));
}

TEST(RegexTranslation, RewritesOnlyWhatItMust) {
  EXPECT_EQ(*translate_hf_regex("abc[x-z]+\\d", "t"), "abc[x-z]+\\d");
  const std::string s = *translate_hf_regex("\\s+(?!\\S)", "t");
  EXPECT_EQ(s.find("\\s"), std::string::npos);
  EXPECT_NE(s.find("[^\\t-\\r"), std::string::npos);
  EXPECT_NE(translate_hf_regex("[^\\s\\p{L}]", "t")->find("\\x{3000}"), std::string::npos);
  EXPECT_NE(translate_hf_regex("\\pL", "t")->find("[\\p{L}\\x{"), std::string::npos);
  EXPECT_EQ(*translate_hf_regex("\\p{Lu}\\\\s", "t"), "\\p{Lu}\\\\s");  // escaped backslash, not \s
  Result<std::string> bad = translate_hf_regex("[\\S]", "file.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::tokenizer_bad_file);
}

TEST(PreTokenizer, BadRegexIsABadFile) {
  Result<PreTokenizer> pre = PreTokenizer::build({"(unclosed"}, "file.json");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), ErrorCode::tokenizer_bad_file);
  EXPECT_NE(pre.status().message().find("file.json"), std::string::npos);
}

TEST(PreTokenizer, VeryLongWhitespaceRunDoesNotFail) {
  Result<PreTokenizer> pre = PreTokenizer::build(deepseek_patterns(), "fixture");
  ASSERT_TRUE(pre.ok());
  const std::string text = std::string(200000, ' ') + "x";
  const Pieces pieces = split(*pre, text);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1], " x");
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

TEST(UnicodeDeltaSet, FindsOnlyNewerCodePoints) {
  const UnicodeDeltaSet delta;
  EXPECT_TRUE(delta.contains(0x1FABF));   // goose, Unicode 15
  EXPECT_TRUE(delta.contains(0x13460));   // Egyptian hieroglyphs extended-A, Unicode 16
  EXPECT_FALSE(delta.contains(0x1F600));  // 😀, old
  EXPECT_FALSE(delta.contains('a'));
  EXPECT_FALSE(delta.intersects("plain text, café, 中文, 😀"));
  EXPECT_TRUE(delta.intersects("x \U0001FABF y"));
  EXPECT_FALSE(delta.intersects("\xF0\x9F\xAA"));  // truncated: nothing to decode
}

}  // namespace
}  // namespace ds
