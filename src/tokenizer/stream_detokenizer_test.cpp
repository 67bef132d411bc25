#include <gtest/gtest.h>

#include <random>

#include "tokenizer/tiny_tokenizer_fixture.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds {
namespace {

Tokenizer tiny() {
  Result<Tokenizer> tok = Tokenizer::from_json(testing::tiny_tokenizer_json(), "", "tiny");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

std::vector<int32_t> byte_ids(std::string_view bytes) {
  std::vector<int32_t> ids;
  for (char c : bytes) ids.push_back(testing::tiny_byte_id(static_cast<unsigned char>(c)));
  return ids;
}

// Pushes ids one by one, recording what each push returned.
std::vector<std::string> stream(StreamDetokenizer& d, const std::vector<int32_t>& ids) {
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    Result<std::string> piece = d.push(id);
    EXPECT_TRUE(piece.ok());
    pieces.push_back(*piece);
  }
  return pieces;
}

TEST(StreamDetokenizer, HoldsBackSplitEmojiAndCjk) {
  const Tokenizer tok = tiny();
  StreamDetokenizer d(tok);
  // 😀 = F0 9F 98 80, 中 = E4 B8 AD, each byte its own token.
  const auto pieces = stream(d, byte_ids("a\xF0\x9F\x98\x80\xE4\xB8\xAD"));
  EXPECT_EQ(pieces, std::vector<std::string>({"a", "", "", "", "😀", "", "", "中"}));
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDetokenizer, ZwjSequenceComesOutWhole) {
  const Tokenizer tok = tiny();
  StreamDetokenizer d(tok);
  const std::string family = "👨‍👩‍👧";
  std::string joined;
  for (const std::string& p : stream(d, byte_ids(family))) {
    EXPECT_EQ(utf8::first_invalid_offset(p), utf8::kValid);
    joined += p;
  }
  EXPECT_EQ(joined + d.flush(), family);
}

TEST(StreamDetokenizer, FlushReplacesAnIncompleteCharacter) {
  const Tokenizer tok = tiny();
  StreamDetokenizer d(tok);
  EXPECT_EQ(stream(d, byte_ids("ok\xF0\x9F")), std::vector<std::string>({"o", "k", "", ""}));
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.flush(), "");  // nothing left after a flush
}

TEST(StreamDetokenizer, ImpossibleBytesAreReplacedAtOnce) {
  const Tokenizer tok = tiny();
  StreamDetokenizer d(tok);
  // A lone continuation byte can never become valid: it is replaced immediately, not held.
  EXPECT_EQ(stream(d, byte_ids("\x80z")), std::vector<std::string>({"\xEF\xBF\xBD", "z"}));
  // A lead byte followed by a non-continuation: the lead alone becomes U+FFFD.
  EXPECT_EQ(stream(d, byte_ids("\xE4x")), std::vector<std::string>({"", "\xEF\xBF\xBDx"}));
}

TEST(StreamDetokenizer, SkipsSpecialTokensAndRejectsUnknownIds) {
  const Tokenizer tok = tiny();
  StreamDetokenizer skipping(tok, /*skip_special=*/true);
  EXPECT_EQ(*skipping.push(0), "");
  EXPECT_EQ(*skipping.push(264), "hello");
  StreamDetokenizer keeping(tok);
  EXPECT_EQ(*keeping.push(0), "<s>");
  Result<std::string> bad = keeping.push(5000);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::tokenizer_unknown_id);
}

TEST(StreamDetokenizer, StreamEqualsLossyDecodeOfTheWhole) {
  const Tokenizer tok = tiny();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> ids;
    const size_t n = rng() % 16;
    for (size_t i = 0; i < n; ++i) {
      ids.push_back(rng() % 3 == 0 ? 259 + static_cast<int32_t>(rng() % 10)  // a merged token
                                   : testing::tiny_byte_id(static_cast<unsigned char>(
                                         rng() % 4 ? 0x80 + rng() % 0x78 : rng() % 128)));
    }
    StreamDetokenizer d(tok);
    std::string streamed;
    for (const std::string& p : stream(d, ids)) {
      ASSERT_EQ(utf8::first_invalid_offset(p), utf8::kValid);
      streamed += p;
    }
    streamed += d.flush();
    EXPECT_EQ(streamed, utf8::to_valid_lossy(*tok.decode(ids))) << "trial " << trial;
  }
}

}  // namespace
}  // namespace ds
