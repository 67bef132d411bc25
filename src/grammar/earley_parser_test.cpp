// The Earley matcher on hand-written grammars: ambiguity, left recursion, nullable rules, stars, rollback.
#include <gtest/gtest.h>

#include "grammar/grammar_builder.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

using testing::grammar_accepts;

TEST(EarleyParser, AmbiguousLeftRecursiveGrammar) {
  GrammarBuilder b({});
  const uint32_t s = b.new_rule("s");
  b.add_alternative(s, {GrammarBuilder::ref(s), b.byte('+'), GrammarBuilder::ref(s)});
  b.add_alternative(s, {b.byte('a')});
  Result<Grammar> g = b.finish();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (const char* yes : {"a", "a+a", "a+a+a+a"}) EXPECT_TRUE(grammar_accepts(*g, yes)) << yes;
  for (const char* no : {"", "+", "a+", "+a", "aa", "a++a"}) EXPECT_FALSE(grammar_accepts(*g, no)) << no;
}

TEST(EarleyParser, NullableRulesAndStars) {
  // s ::= a b "c" [x]* ; a ::= "" | "a" ; b ::= a a
  GrammarBuilder b({});
  const uint32_t s = b.new_rule("s");
  const uint32_t a = b.new_rule("a");
  const uint32_t bb = b.new_rule("b");
  b.add_alternative(a, {});
  b.add_alternative(a, {b.byte('a')});
  b.add_alternative(bb, {GrammarBuilder::ref(a), GrammarBuilder::ref(a)});
  b.add_alternative(
      s, {GrammarBuilder::ref(a), GrammarBuilder::ref(bb), b.byte('c'), GrammarBuilder::star(b.byte('x'))});
  Result<Grammar> g = b.finish();
  ASSERT_TRUE(g.ok());
  for (const char* yes : {"c", "ac", "aac", "aaac", "cx", "aacxxx"})
    EXPECT_TRUE(grammar_accepts(*g, yes)) << yes;
  for (const char* no : {"", "aaaac", "xc", "ca", "a"}) EXPECT_FALSE(grammar_accepts(*g, no)) << no;
}

TEST(EarleyParser, StarOfNullableRuleTerminates) {
  // s ::= (a)* "z" ; a ::= "" | "y"
  GrammarBuilder b({});
  const uint32_t s = b.new_rule("s");
  const uint32_t a = b.new_rule("a");
  b.add_alternative(a, {});
  b.add_alternative(a, {b.byte('y')});
  b.add_alternative(s, {GrammarBuilder::star(GrammarBuilder::ref(a)), b.byte('z')});
  Result<Grammar> g = b.finish();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(grammar_accepts(*g, "z"));
  EXPECT_TRUE(grammar_accepts(*g, "yyyz"));
  EXPECT_FALSE(grammar_accepts(*g, "yy"));
}

TEST(EarleyParser, BoundedRepeatAndSeparated) {
  GrammarBuilder b({});
  const uint32_t s = b.new_rule("s");
  Alternative alt;
  ASSERT_TRUE(b.append_separated(alt, b.byte('x'), b.byte(','), 2, 4).ok());
  b.add_alternative(s, alt);
  Result<Grammar> g = b.finish();
  ASSERT_TRUE(g.ok());
  for (const char* yes : {"x,x", "x,x,x", "x,x,x,x"}) EXPECT_TRUE(grammar_accepts(*g, yes)) << yes;
  for (const char* no : {"", "x", "x,x,x,x,x", "x,", "xx"}) EXPECT_FALSE(grammar_accepts(*g, no)) << no;
}

TEST(GrammarMatcher, AcceptRejectRollback) {
  GrammarBuilder b({});
  const uint32_t s = b.new_rule("s");
  Alternative alt;
  b.append_literal(alt, "ab");
  alt.push_back(GrammarBuilder::star(b.byte('c')));
  b.append_literal(alt, "d");
  b.add_alternative(s, alt);
  Result<Grammar> g = b.finish();
  ASSERT_TRUE(g.ok());
  // ids: 0 EOS, 1 "a", 2 "ab", 3 "c", 4 "cc", 5 "d", 6 "x"
  auto vocab = std::make_shared<const TokenTrie>(TokenTrie::build({"", "a", "ab", "c", "cc", "d", "x"}, 0));
  GrammarMatcher m(testing::compile_for(std::move(*g), vocab));
  EXPECT_FALSE(m.accept_token(6));
  EXPECT_FALSE(m.accept_token(0)) << "EOS before the grammar accepts";
  ASSERT_TRUE(m.accept_token(2));
  ASSERT_TRUE(m.accept_token(4));
  ASSERT_TRUE(m.accept_token(3));
  EXPECT_FALSE(m.is_accepting());
  ASSERT_TRUE(m.accept_token(5));
  EXPECT_TRUE(m.is_accepting());
  EXPECT_TRUE(m.is_terminated());
  ASSERT_TRUE(m.rollback(2));
  EXPECT_EQ(m.n_tokens(), 2u);
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(5));
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(3)) << "nothing after EOS";
  ASSERT_TRUE(m.rollback(4));
  EXPECT_EQ(m.n_tokens(), 0u);
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_FALSE(m.rollback(2));
}

}  // namespace
}  // namespace ds::grammar
