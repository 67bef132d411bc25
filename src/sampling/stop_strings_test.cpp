#include "sampling/stop_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ds {
namespace {

// What a matcher must have emitted after seeing `text`: everything before the earliest stop string
// if one occurs, else all but the longest suffix that is a proper prefix of some stop string.
std::string emittable(const std::string& text, const std::vector<std::string>& stops, bool& stopped) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  stopped = first != std::string::npos;
  if (stopped) return text.substr(0, first);
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t len = std::min(s.size() - 1, text.size()); len > hold; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return text.substr(0, text.size() - hold);
}

StopStringMatcher make(const std::vector<std::string>& stops) {
  Result<StopStringMatcher> m = StopStringMatcher::create(stops, 16, 64);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

// Every one of the 2^(n-1) ways to cut `text` into pieces: after each piece the emitted text equals
// the oracle's for the bytes seen so far (so the matcher holds back exactly the text that could
// still start a stop string), and the final output is the same for every split.
void exhaustive_split(const std::string& text, const std::vector<std::string>& stops) {
  ASSERT_LE(text.size(), 16u);
  const uint32_t n_cuts = static_cast<uint32_t>(text.size()) - 1;
  bool expect_stop = false;
  const std::string expected = emittable(text, stops, expect_stop);
  for (uint32_t mask = 0; mask < (1u << n_cuts); ++mask) {
    StopStringMatcher m = make(stops);
    std::string emitted, piece;
    bool stopped = false;
    for (size_t i = 0; i < text.size(); ++i) {
      piece += text[i];
      const bool cut_after = i + 1 == text.size() || (mask >> i & 1u);
      if (!cut_after) continue;
      const StopFeedResult r = m.feed(piece);
      piece.clear();
      emitted += r.text;
      if (stopped) {
        ASSERT_TRUE(r.text.empty()) << "nothing may follow a stop";
      }
      stopped |= r.stopped;
      bool oracle_stopped = false;
      ASSERT_EQ(emitted, emittable(text.substr(0, i + 1), stops, oracle_stopped))
          << "text '" << text << "' split mask " << mask << " after byte " << i;
      ASSERT_EQ(stopped, oracle_stopped);
    }
    const std::string rest = m.flush();
    if (stopped) {
      ASSERT_TRUE(rest.empty());
    }
    emitted += rest;
    ASSERT_EQ(emitted, stopped ? expected : text) << "text '" << text << "' split mask " << mask;
    ASSERT_EQ(stopped, expect_stop);
  }
}

TEST(StopStringMatcher, ExhaustiveSplits) {
  exhaustive_split("hello world!", {"world"});
  exhaustive_split("hello world!", {"xyz"});                        // no stop: everything comes out at flush
  exhaustive_split("abababac", {"abac", "bab"});                    // overlapping prefixes; "bab" is first
  exhaustive_split("aaaab", {"aaab", "aab"});                       // self-overlapping stop strings
  exhaustive_split("one\n\ntwo", {"\n\n", "two"});                  // multiple stops, the earliest wins
  exhaustive_split("abcabcab", {"abcd"});                           // a long near-miss at the end is flushed
  exhaustive_split("caf\xc3\xa9 \xe6\x97\xa5!", {"\xe6\x97\xa5"});  // UTF-8: "café 日!" stopping at 日
  exhaustive_split("\xc3\xa9\xc3\xa8\xc3\xa9", {"\xc3\xa8\xc3\xa0"});  // shared lead byte, no match
}

TEST(StopStringMatcher, ReportsWhichStopMatched) {
  StopStringMatcher m = make({"END", "ST"});
  EXPECT_EQ(m.feed("fir").text, "fir");
  EXPECT_FALSE(m.stopped());
  const StopFeedResult r = m.feed("STEND");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  ASSERT_TRUE(m.matched_index().has_value());
  EXPECT_EQ(*m.matched_index(), 1u);
  EXPECT_TRUE(m.feed("more").stopped);
  EXPECT_EQ(m.feed("more").text, "");
}

TEST(StopStringMatcher, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher m = make({});
  EXPECT_EQ(m.feed("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, ValidatesLimits) {
  const auto message_of = [](std::vector<std::string> stops, size_t max_count, size_t max_bytes) {
    Result<StopStringMatcher> m = StopStringMatcher::create(std::move(stops), max_count, max_bytes);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), ErrorCode::invalid_argument);
    return m.status().message();
  };
  EXPECT_EQ(message_of({"a", "b", "c", "d", "e"}, 4, 16).rfind("stop", 0), 0u);
  EXPECT_EQ(message_of({"a", ""}, 4, 16).rfind("stop[1]", 0), 0u);
  EXPECT_EQ(message_of({"0123456789abcdefg"}, 4, 16).rfind("stop[0]", 0), 0u);
  EXPECT_TRUE(StopStringMatcher::create({"a", "b", "c", "d"}, 4, 16).ok());
  EXPECT_TRUE(StopStringMatcher::create({"0123456789abcdef"}, 4, 16).ok());
}

}  // namespace
}  // namespace ds
