#include "tokenizer/added_vocabulary.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace ds {
namespace {

AddedToken token(int32_t id, std::string content, bool special = true, bool normalized = false) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  t.normalized = normalized;
  return t;
}

// Renders segments as "text|" for plain and "[id]" for added tokens.
std::string render(const AddedVocabulary& v, std::string_view text) {
  std::vector<TextSegment> segments;
  v.split(text, segments);
  std::string out;
  for (const TextSegment& s : segments) {
    out += s.token_id >= 0 ? fmt::format("[{}]", s.token_id) : fmt::format("{}|", s.text);
  }
  return out;
}

TEST(AddedVocabulary, LeftmostLongestMatch) {
  Result<AddedVocabulary> v =
      AddedVocabulary::build({token(1, "<a>"), token(2, "<a><b>"), token(3, "b>")}, "t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(render(*v, "x<a><b>y"), "x|[2]y|");  // longest at the leftmost start
  EXPECT_EQ(render(*v, "<a><c>"), "[1]<c>|");
  EXPECT_EQ(render(*v, "<ab>"), "<a|[3]");   // "b>" found inside plain text
  EXPECT_EQ(render(*v, "<a<a>"), "<a|[1]");  // a failed start does not hide a later one
  EXPECT_EQ(render(*v, "plain"), "plain|");
  EXPECT_EQ(render(*v, ""), "");
}

TEST(AddedVocabulary, NonNormalizedTokensAreMatchedFirst) {
  // "<|user|>" (normalized) would start earlier, but the raw pass takes "|user|>x" first, as HF
  // matches non-normalized tokens on the whole text before normalized ones on what is left.
  Result<AddedVocabulary> v = AddedVocabulary::build(
      {token(10, "<|user|>", /*special=*/false, /*normalized=*/true), token(11, "|user|>x", true, false)},
      "t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(render(*v, "<|user|>x"), "<|[11]");
  EXPECT_EQ(render(*v, "<|user|>y"), "[10]y|");
}

TEST(AddedVocabulary, StripAndSingleWordFlags) {
  AddedToken l = token(1, "<L>");
  l.lstrip = true;
  AddedToken r = token(2, "<R>");
  r.rstrip = true;
  AddedToken w = token(3, "cat");
  w.single_word = true;
  Result<AddedVocabulary> v = AddedVocabulary::build({l, r, w}, "t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(render(*v, "a \t<L>b"), "a|[1]b|");       // spaces before <L> join it
  EXPECT_EQ(render(*v, "a<R> \u3000 b"), "a|[2]b|");  // Unicode spaces after <R> join it
  EXPECT_EQ(render(*v, "a cat b"), "a |[3] b|");
  EXPECT_EQ(render(*v, "concatenate"), "concatenate|");  // inside a word: not a match
  EXPECT_EQ(render(*v, "cat"), "[3]");
  EXPECT_EQ(render(*v, "écat"), "écat|");  // é is a word character
}

TEST(AddedVocabulary, LookupsAndSpecialFlag) {
  Result<AddedVocabulary> v =
      AddedVocabulary::build({token(0, "<s>"), token(7, "<x>", false, true), token(9, "")}, "t");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->token_to_id("<x>"), 7);
  EXPECT_FALSE(v->token_to_id("").has_value());  // empty content is ignored, as HF does
  EXPECT_TRUE(v->is_special(0));
  EXPECT_FALSE(v->is_special(7));
  EXPECT_FALSE(v->is_special(9));
  EXPECT_EQ(v->find_by_id(7)->content, "<x>");
}

}  // namespace
}  // namespace ds
