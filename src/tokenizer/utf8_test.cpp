#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace ds {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(utf8::first_invalid_offset(""), utf8::kValid);
  EXPECT_EQ(utf8::first_invalid_offset("plain ASCII text, long enough for the 8-byte path"), utf8::kValid);
  EXPECT_EQ(utf8::first_invalid_offset("é 中 😀 \xF4\x8F\xBF\xBF \xEF\xBF\xBF"),
            utf8::kValid);  // incl. U+10FFFF
}

TEST(Utf8, NamesTheOffsetOfTheFirstBadByte) {
  EXPECT_EQ(utf8::first_invalid_offset("abc\xFF"), 3u);
  EXPECT_EQ(utf8::first_invalid_offset("abcdefghij\x80"), 10u);   // lone continuation after the fast path
  EXPECT_EQ(utf8::first_invalid_offset("a\xC0\x80"), 1u);         // overlong NUL
  EXPECT_EQ(utf8::first_invalid_offset("\xE0\x80\x80"), 0u);      // overlong 3-byte
  EXPECT_EQ(utf8::first_invalid_offset("xx\xED\xA0\x80"), 2u);    // surrogate U+D800
  EXPECT_EQ(utf8::first_invalid_offset("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(utf8::first_invalid_offset("ok\xE4\xB8"), 2u);        // truncated at the end
  EXPECT_EQ(utf8::first_invalid_offset("\xE4\xB8\x41"), 0u);      // bad continuation
  EXPECT_EQ(utf8::first_invalid_offset("\xF5\x80\x80\x80"), 0u);
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  // Unicode 15 §3.9, Table 3-8: each maximal subpart becomes one U+FFFD.
  EXPECT_EQ(utf8::to_valid_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d");
  EXPECT_EQ(utf8::to_valid_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: 3
  EXPECT_EQ(utf8::to_valid_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");  // truncated emoji: 1
  EXPECT_EQ(utf8::to_valid_lossy("fine é"), "fine é");
}

TEST(Utf8, IncompleteTailIsOnlyAValidPrefix) {
  EXPECT_EQ(utf8::incomplete_tail_length("abc"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8::incomplete_tail_length("\xE4"), 1u);
  EXPECT_EQ(utf8::incomplete_tail_length("\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8::incomplete_tail_length("\xE0\x80"), 0u);          // can never complete
  EXPECT_EQ(utf8::incomplete_tail_length("\x80\x80"), 0u);
}

TEST(Utf8, LossyOutputIsAlwaysValidOnRandomBytes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes(rng() % 24, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 4 == 0 ? rng() % 128 : 0x80 + rng() % 128);
    const std::string fixed = utf8::to_valid_lossy(bytes);
    ASSERT_EQ(utf8::first_invalid_offset(fixed), utf8::kValid) << "trial " << trial;
    if (utf8::first_invalid_offset(bytes) == utf8::kValid) {
      EXPECT_EQ(fixed, bytes);
    }
  }
}

TEST(Utf8, AppendCodepointRoundTrips) {
  for (uint32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    utf8::append_codepoint(cp, s);
    EXPECT_EQ(utf8::char_length_at(s, 0), s.size()) << cp;
  }
}

}  // namespace
}  // namespace ds
