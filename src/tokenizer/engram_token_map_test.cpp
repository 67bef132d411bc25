// V4.1 Engram's compressed token map: the normalisation chain on hand-picked strings, and the map
// of the tiny byte-level fixture tokenizer counted by hand.
#include "tokenizer/engram_token_map.h"

#include <gtest/gtest.h>

#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds {
namespace {

TEST(EngramTokenMap, NormalisationChain) {
  EXPECT_EQ(engram_normalize("Café"), "cafe");  // NFD, accent stripped, lowercase
  EXPECT_EQ(engram_normalize("\xC3\x89"
                             "COLE"),
            "ecole");                                                   // É
  EXPECT_EQ(engram_normalize("\xEF\xBC\xA1\xEF\xBD\x82"), "ab");        // fullwidth Ａｂ (NFKC)
  EXPECT_EQ(engram_normalize("\xEF\xAC\x81"), "fi");                    // the ﬁ ligature (NFKC)
  EXPECT_EQ(engram_normalize("\xE2\x84\xA6"), "\xCF\x89");              // Ohm sign -> Ω -> ω
  EXPECT_EQ(engram_normalize("\xC4\xB0stanbul"), "istanbul");           // İ: NFD I + dot, dot stripped
  EXPECT_EQ(engram_normalize("  Hello\t\n\r World  "), "hello world");  // collapse, then strip
  EXPECT_EQ(engram_normalize(" \t\n"), "");
  EXPECT_EQ(engram_normalize("\xCC\x81"), "");  // a lone combining acute (Mn)
  EXPECT_EQ(engram_normalize("\xE4\xB8\xAD\xE6\x96\x87"), "\xE4\xB8\xAD\xE6\x96\x87");  // 中文 unchanged
}

TEST(EngramTokenMap, TinyTokenizerCountedByHand) {
  Result<Tokenizer> tok = Tokenizer::from_json(testing::tiny_tokenizer_json(), "", "tiny");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const int32_t n_ids = testing::kTinyFirstMergeId + static_cast<int32_t>(testing::tiny_merges().size());
  Result<EngramTokenMap> m = build_engram_token_map(*tok, n_ids);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto id = [&](unsigned char b) { return m->compressed[testing::tiny_byte_id(b)]; };
  EXPECT_EQ(m->compressed[0], 0);  // first appearance order
  EXPECT_EQ(m->compressed[1], 1);
  EXPECT_EQ(id('A'), id('a'));
  for (unsigned char w : {'\t', '\n', '\v', '\f', '\r'}) EXPECT_EQ(id(w), id(' ')) << int{w};
  EXPECT_EQ(m->compressed[268], id(' '));  // "ĠĠ" = two spaces -> " "
  EXPECT_EQ(m->compressed[260], id('t'));  // "Ġt" = " t" -> "t"
  EXPECT_NE(m->compressed[261], id('t'));  // " the" -> "the", new
  EXPECT_NE(id(0x80), id(0x81));           // undecodable bytes keep their raw spelling
  for (unsigned char w : {0x1C, 0x1D, 0x1E, 0x1F}) EXPECT_EQ(id(w), id(' ')) << int{w};  // Python isspace
  // 3 specials + 93 ASCII keys (128 − 26 upper-case − 9 more whitespace: \t \n \v \f \r and
  // U+001C..U+001F) + 128 raw high bytes + 8 new merges ("he", "the", "ll", "hell", "hello", "aa",
  // "aaaa", "12").
  EXPECT_EQ(m->n_compressed, 3 + 93 + 128 + 8);
  // Ids the tokenizer lacks (vocab_size pads past the vocabulary) share the key "" (HF decodes
  // them to ""): one more compressed id, at the first of them.
  Result<EngramTokenMap> padded = build_engram_token_map(*tok, n_ids + 2);
  ASSERT_TRUE(padded.ok()) << padded.status().to_string();
  EXPECT_EQ(padded->n_compressed, m->n_compressed + 1);
  EXPECT_EQ(padded->compressed[n_ids], m->n_compressed);
  EXPECT_EQ(padded->compressed[n_ids + 1], m->n_compressed);
}

}  // namespace
}  // namespace ds
