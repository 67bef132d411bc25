#include "tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace ds {
namespace {

TEST(ByteLevel, KnownMappings) {
  const ByteLevelAlphabet a;
  EXPECT_EQ(a.char_of_byte(' '), "Ġ");   // U+0120
  EXPECT_EQ(a.char_of_byte('\n'), "Ċ");  // U+010A
  EXPECT_EQ(a.char_of_byte('A'), "A");
  EXPECT_EQ(a.char_of_byte(0x00), "Ā");          // U+0100: first byte outside the printable set
  EXPECT_EQ(a.codepoint_of_byte(0xAD), 0x143u);  // soft hyphen: the last of the 68 remapped bytes
  EXPECT_EQ(a.codepoint_of_byte(0xA1), 0xA1u);
}

TEST(ByteLevel, IsABijectionOnAllBytes) {
  const ByteLevelAlphabet a;
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = a.codepoint_of_byte(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << "byte " << b;
    EXPECT_EQ(a.byte_of_codepoint(cp), b);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(a.decode(a.encode(all)), all);
}

TEST(ByteLevel, DecodeRejectsCharactersOutsideTheAlphabet) {
  const ByteLevelAlphabet a;
  EXPECT_EQ(a.decode("ĠHello"), " Hello");
  EXPECT_FALSE(a.decode("<｜User｜>").has_value());  // U+FF5C is not a byte character
  EXPECT_FALSE(a.decode(" ").has_value());           // a raw space is not in the alphabet
  EXPECT_FALSE(a.decode("\xFF").has_value());        // not UTF-8
}

}  // namespace
}  // namespace ds
