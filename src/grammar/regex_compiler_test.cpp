// The regex compiler against std::regex (ECMAScript, a second engine) on random strings, plus errors.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "grammar/regex_compiler.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

TEST(RegexCompiler, AgreesWithStdRegexOnRandomStrings) {
  // Patterns within the shared subset; the alphabet avoids '\r' (ECMAScript '.' excludes it, PCRE does not).
  const char* patterns[] = {
      "abc",         "a|b|cd", "(ab)*c",       "a+b?c*",      "[a-c]{2}",   "[a-c]{2,}",
      "[a-c]{1,3}d", "[^ab]+", "\\d{2,4}",     "\\w+\\s\\w*", "(?:a|bc)+$", "^x(y|z)?$",
      "\\D\\W\\S",   ".{0,3}", "[\\d.-]+",     "a{0}b",       "(a|b|)c",    "[-a]+",
      "\\x41\\.\\*", "(a*)*b", "((a|b){2}c)+", "a{2}?",       "[\\]\\\\]+", "(?:a){1}b",
  };
  const std::string alphabet = "abcdxyz.-*\\]A0129 \t\nZ_";
  std::mt19937 rng(42);
  for (const char* pattern : patterns) {
    Result<Grammar> g = compile_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
    const ParserTables tables = ParserTables::build(*g);
    const std::regex re(pattern, std::regex::ECMAScript);
    int n_match = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const size_t len = std::uniform_int_distribution<size_t>(0, 7)(rng);
      for (size_t j = 0; j < len; ++j)
        s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      const bool want = std::regex_match(s, re);
      n_match += want;
      ASSERT_EQ(testing::grammar_accepts(tables, s), want) << pattern << " on '" << s << "'";
    }
    (void)n_match;
  }
}

TEST(RegexCompiler, WideBoundedRepeatsAcceptExactlyTheirCounts) {
  // Bounds wider than 32 optional copies nest in blocks of 32 (GrammarBuilder::append_repeat): every
  // count on both sides of each bound and of each block boundary, with and without a byte after.
  struct Case {
    const char* pattern;
    std::string unit;  // one copy
    int min, max;
    std::string after;
  };
  const Case cases[] = {
      {"a{0,70}", "a", 0, 70, ""},         {"a{0,64}x", "a", 0, 64, "x"},
      {"(ab|c){3,75}d", "ab", 3, 75, "d"}, {"(ab|c){3,75}d", "c", 3, 75, "d"},
      {"[a-c]{33,100}", "b", 33, 100, ""}, {"a{5,37}", "a", 5, 37, ""},
      {"a{1,33}", "a", 1, 33, ""},
  };
  for (const Case& c : cases) {
    Result<Grammar> g = compile_regex(c.pattern);
    ASSERT_TRUE(g.ok()) << c.pattern << ": " << g.status().to_string();
    const ParserTables tables = ParserTables::build(*g);
    const std::regex re(c.pattern, std::regex::ECMAScript);
    for (int n = 0; n <= c.max + 3; ++n) {
      std::string s;
      for (int i = 0; i < n; ++i) s += c.unit;
      s += c.after;
      const bool want = n >= c.min && n <= c.max;
      ASSERT_EQ(std::regex_match(s, re), want) << c.pattern << " x" << n;  // the case itself is right
      ASSERT_EQ(testing::grammar_accepts(tables, s), want) << c.pattern << " with " << n << " copies";
    }
  }
}

TEST(RegexCompiler, NamedGroupsAndLazyQuantifiers) {
  Result<Grammar> g = compile_regex("(?<year>\\d{4})-(?P<m>\\d\\d)x+?");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(testing::grammar_accepts(*g, "2024-05xx"));
  EXPECT_FALSE(testing::grammar_accepts(*g, "2024-5x"));
}

TEST(RegexCompiler, Utf8Characters) {
  Result<Grammar> g = compile_regex("[é-ü]+\\u00e9.[^a]");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(testing::grammar_accepts(*g, "éüéxé"));
  EXPECT_TRUE(testing::grammar_accepts(*g, "ñé😀日"));
  EXPECT_FALSE(testing::grammar_accepts(*g, "ñé😀a"));
  EXPECT_FALSE(testing::grammar_accepts(*g, "eé😀x"));
  EXPECT_FALSE(testing::grammar_accepts(*g, std::string("\xc3\xa9\xc3\xa9\xff\xff")));  // invalid UTF-8
}

TEST(RegexCompiler, ErrorsNameTheConstructAndOffset) {
  struct Case {
    const char* pattern;
    ErrorCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"a(b", ErrorCode::grammar_bad_input, "offset 3"},
      {"a)b", ErrorCode::grammar_bad_input, "unbalanced"},
      {"[ab", ErrorCode::grammar_bad_input, "unterminated"},
      {"*a", ErrorCode::grammar_bad_input, "quantifier"},
      {"(a)\\1", ErrorCode::grammar_unsupported, "escape \\1"},
      {"a(?=b)", ErrorCode::grammar_unsupported, "lookaround"},
      {"\\bword", ErrorCode::grammar_unsupported, "\\b"},
      {"a^b", ErrorCode::grammar_unsupported, "'^'"},
      {"a$b", ErrorCode::grammar_unsupported, "'$'"},
      {"a{3,1}", ErrorCode::grammar_bad_input, "inverted"},
      {"a{99999}", ErrorCode::grammar_too_large, "limit"},
      {"[z-a]", ErrorCode::grammar_bad_input, "order"},
  };
  for (const Case& c : cases) {
    Result<Grammar> g = compile_regex(c.pattern);
    ASSERT_FALSE(g.ok()) << c.pattern;
    EXPECT_EQ(g.status().code(), c.code) << c.pattern << ": " << g.status().message();
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos)
        << c.pattern << ": " << g.status().message();
  }
}

}  // namespace
}  // namespace ds::grammar
