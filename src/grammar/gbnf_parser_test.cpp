// GBNF: llama.cpp's json.gbnf parsed, random documents sampled byte by byte from it and checked by an
// independent JSON parser (nlohmann); errors with line:column; the compiler's cache.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_compiler.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

// llama.cpp grammars/json.gbnf with its multi-line alternatives; the exponent is cut to two digits
// because the independent parser (nlohmann) rejects numbers that overflow a double.
const char* const kJsonGbnf = R"G(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,2})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)G";

// A random string of the grammar's language: bytes drawn among those the parser accepts, preferring
// closing bytes as the string grows so that walks end.
std::optional<std::string> sample(const ParserTables& t, std::mt19937& rng, size_t max_len) {
  EarleyParser p(t);
  std::string out;
  while (out.size() < max_len) {
    if (p.is_accepting() && std::uniform_int_distribution<int>(0, 3)(rng) == 0) return out;
    std::vector<uint8_t> allowed, closing;
    for (int b = 0; b < 256; ++b) {
      if (!p.push_byte(static_cast<uint8_t>(b))) continue;
      p.pop_to(p.n_sets() - 1);
      allowed.push_back(static_cast<uint8_t>(b));
      if (b == '"' || b == '}' || b == ']') closing.push_back(static_cast<uint8_t>(b));
    }
    if (allowed.empty()) return p.is_accepting() ? std::optional(out) : std::nullopt;
    const bool close =
        !closing.empty() && std::uniform_int_distribution<size_t>(0, max_len)(rng) < out.size() * 2;
    const std::vector<uint8_t>& from = close ? closing : allowed;
    const uint8_t b = from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
    EXPECT_TRUE(p.push_byte(b));
    out += static_cast<char>(b);
  }
  return std::nullopt;
}

TEST(Gbnf, LlamaCppJsonGrammarSamplesParseAsJson) {
  Result<Grammar> g = compile_gbnf(kJsonGbnf);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ParserTables t = ParserTables::build(*g);
  EXPECT_TRUE(testing::grammar_accepts(t, "{\"a\": [1, -2.5e3, \"x\\n\", true, null, {}]}"));
  EXPECT_FALSE(testing::grammar_accepts(t, "{\"a\" 1}"));
  std::mt19937 rng(3);
  int n_done = 0;
  for (int i = 0; i < 300; ++i) {
    std::optional<std::string> s = sample(t, rng, 200);
    if (!s) continue;
    ++n_done;
    EXPECT_TRUE(nlohmann::json::accept(*s)) << *s;
  }
  EXPECT_GT(n_done, 100);
}

TEST(Gbnf, ArithmeticAndRepetition) {
  Result<Grammar> g = compile_gbnf(R"G(
root ::= expr
expr ::= term (("+" | "-") term)*   # left-assoc
term ::= [0-9]{1,3} | "(" expr ")"
)G");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (const char* yes : {"1", "12+3", "(1-2)+345", "((7))"})
    EXPECT_TRUE(testing::grammar_accepts(*g, yes)) << yes;
  for (const char* no : {"", "1234", "1+", "(1", "1 + 2"})
    EXPECT_FALSE(testing::grammar_accepts(*g, no)) << no;
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"root ::= foo", "'foo' is used but never defined"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"abc", "1:14: unterminated"},
      {"root ::= [a-", "1:13"},
      {"root ::= (\"a\"", "expected ')'"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"a\"{3,1}", "inverted"},
      {"start ::= \"a\"", "'root' is used but never defined"},
  };
  for (const Case& c : cases) {
    Result<Grammar> g = compile_gbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos)
        << c.text << ": " << g.status().message();
  }
}

TEST(Lark, JsonSubsetSamplesParseAsJson) {
  Result<Grammar> g = compile_ebnf(R"L(
// a JSON subset in Lark
?start: value
?value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: /"[a-z ]{0,8}"/
NUMBER: /-?[1-9][0-9]{0,2}/ | "0"
)L");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ParserTables t = ParserTables::build(*g);
  EXPECT_TRUE(testing::grammar_accepts(t, R"({"a b":[1,-20,{}],"c":null})"));
  EXPECT_FALSE(testing::grammar_accepts(t, R"({"a":01})"));
  std::mt19937 rng(8);
  int n_done = 0;
  for (int i = 0; i < 200; ++i) {
    std::optional<std::string> s = sample(t, rng, 200);
    if (!s) continue;
    ++n_done;
    EXPECT_TRUE(nlohmann::json::accept(*s)) << *s;
  }
  EXPECT_GT(n_done, 50);
}

TEST(Lark, VllmSqlExampleAndRepetition) {
  Result<Grammar> g = compile_lark(R"L(
start: select_statement
select_statement: "SELECT " column " from " table " where " condition
column: "col_1" | "col_2"
table: "table_1"
     | "table_2"
condition: column "=" number
number: DIGIT ~ 1..3
DIGIT: /[0-9]/
)L");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(testing::grammar_accepts(*g, "SELECT col_1 from table_2 where col_2=123"));
  EXPECT_FALSE(testing::grammar_accepts(*g, "SELECT col_1 from table_2 where col_2=1234"));
  EXPECT_FALSE(testing::grammar_accepts(*g, "SELECT col_3 from table_2 where col_2=1"));
  for (const char* bad :
       {"%import common.NUMBER\nstart: NUMBER", "start: \"a\"i", "start: /a/i", "start.2: \"a\""}) {
    Result<Grammar> e = compile_lark(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), ErrorCode::grammar_unsupported) << bad << ": " << e.status().message();
  }
}

TEST(GrammarCompiler, CachesBySpecAndReportsErrors) {
  auto vocab = std::make_shared<const TokenTrie>(TokenTrie::build({"", "a", "b", "{}", "\""}, 0));
  GrammarCompiler compiler(vocab);
  GrammarSpec spec;
  spec.kind = GrammarSpec::Kind::regex;
  spec.source = "a+b";
  Result<std::shared_ptr<const CompiledGrammar>> a = compiler.compile(spec);
  Result<std::shared_ptr<const CompiledGrammar>> b = compiler.compile(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get()) << "same spec, same compiled grammar";
  spec.source = "a+b?";
  Result<std::shared_ptr<const CompiledGrammar>> c = compiler.compile(spec);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(compiler.n_cached(), 2u);
  spec.kind = GrammarSpec::Kind::choice;
  spec.choices = {"yes", "no"};
  Result<std::shared_ptr<const CompiledGrammar>> d = compiler.compile(spec);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(testing::grammar_accepts((*d)->tables(), "no"));
  EXPECT_FALSE(testing::grammar_accepts((*d)->tables(), "n"));
  spec.kind = GrammarSpec::Kind::json_schema;
  spec.source = R"({"type":"object","properties":{"x":{"not":{}}}})";
  Result<std::shared_ptr<const CompiledGrammar>> e = compiler.compile(spec);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::grammar_unsupported);
  EXPECT_NE(e.status().message().find("/properties/x/not"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace ds::grammar
