// JSON Schema compiler: acceptance of hand-picked documents, integer ranges against arithmetic, and the
// errors (keyword + path). The sampled-output check with an independent validator (python3-jsonschema)
// is tests/grammar/json_schema_samples_test.py.
#include <gtest/gtest.h>

#include <random>

#include "grammar/json_formats.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

using testing::grammar_accepts;

Grammar must_compile(const char* schema, JsonSchemaOptions o = {}) {
  Result<Grammar> g = compile_json_schema(schema, o);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
  return g.ok() ? std::move(*g) : Grammar{};
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const Grammar g =
      must_compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"]})");
  for (const char* yes :
       {R"({"b":""})", R"({"a":-3,"b":"x"})", R"({"a":0,"b":"é\n","c":true})", R"({"b":"q","c":false})"})
    EXPECT_TRUE(grammar_accepts(g, yes)) << yes;
  for (const char* no :
       {R"({})", R"({"a":1})", R"({"b":"x","a":1})", R"({"a":01,"b":""})", R"({"b":"x",})", R"({"b":"\x"})"})
    EXPECT_FALSE(grammar_accepts(g, no)) << no;
}

// A number nlohmann cannot represent throws out_of_range, not parse_error: still a bad-input error, never a
// throw (found by grammar_compile_fuzz; the input is in its corpus).
TEST(JsonSchema, NumberOverflowIsBadInput) {
  Result<Grammar> g = compile_json_schema("9991.08947908947983491E93491\n \"", JsonSchemaOptions{});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::grammar_bad_input);
  EXPECT_NE(g.status().message().find("not JSON"), std::string::npos) << g.status().message();
}

TEST(JsonSchema, FlexibleWhitespace) {
  JsonSchemaOptions o;
  o.flexible_whitespace = true;
  const Grammar g =
      must_compile(R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"null"}}}})", o);
  EXPECT_TRUE(grammar_accepts(g, "{ \"a\" : [ null,\n  null ] }"));
  EXPECT_TRUE(grammar_accepts(g, "{}"));
  EXPECT_FALSE(grammar_accepts(g, "{ \"a\" : [ null, ] }"));
  const Grammar compact = must_compile(R"({"type":"object","properties":{"a":{"type":"null"}}})");
  EXPECT_FALSE(grammar_accepts(compact, "{ \"a\":null}"));
}

TEST(JsonSchema, ArraysTuplesAndBounds) {
  const Grammar g = must_compile(R"({"type":"array","prefixItems":[{"const":1},{"enum":["x",null]}],
      "items":{"type":"boolean"},"minItems":1,"maxItems":4})");
  for (const char* yes : {"[1]", R"([1,"x"])", "[1,null,true]", "[1,null,true,false]"})
    EXPECT_TRUE(grammar_accepts(g, yes)) << yes;
  for (const char* no : {"[]", "[2]", "[1,true]", "[1,null,true,false,true]", "[1,]"})
    EXPECT_FALSE(grammar_accepts(g, no)) << no;
}

TEST(JsonSchema, RecursiveRefAndUnions) {
  const Grammar g =
      must_compile(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":["integer","null"]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(grammar_accepts(g, R"({"v":1,"kids":[{"v":null},{"v":2,"kids":[]}]})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"v":1,"kids":[{}]})"));
}

TEST(JsonSchema, StringFormatsPatternsAndLengths) {
  const Grammar date = must_compile(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(grammar_accepts(date, "\"2024-02-28\""));
  EXPECT_FALSE(grammar_accepts(date, "\"2024-02-30\""));
  EXPECT_FALSE(grammar_accepts(date, "\"2024-13-01\""));
  const Grammar pat = must_compile(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})");
  EXPECT_TRUE(grammar_accepts(pat, "\"AB-12\""));
  EXPECT_FALSE(grammar_accepts(pat, "\"AB-\""));
  const Grammar len = must_compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(grammar_accepts(len, "\"é\\n\""));
  EXPECT_FALSE(grammar_accepts(len, "\"é\""));
  EXPECT_FALSE(grammar_accepts(len, "\"abcd\""));
  const Grammar ip = must_compile(R"({"format":"ipv4"})");
  EXPECT_TRUE(grammar_accepts(ip, "\"192.168.0.255\""));
  EXPECT_FALSE(grammar_accepts(ip, "\"192.168.0.256\""));
}

TEST(JsonSchema, IntegerRangesMatchArithmetic) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> bound(-1200, 1200);
  for (int trial = 0; trial < 60; ++trial) {
    std::optional<int64_t> lo, hi;
    if (trial % 4 != 1) lo = bound(rng);
    if (trial % 4 != 2) hi = bound(rng);
    if (lo && hi && *lo > *hi) std::swap(*lo, *hi);
    Result<Grammar> g = compile_regex(integer_range_regex(lo, hi));
    ASSERT_TRUE(g.ok()) << integer_range_regex(lo, hi);
    const ParserTables t = ParserTables::build(*g);
    for (int v = -3000; v <= 3000; ++v) {
      const bool want = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(grammar_accepts(t, std::to_string(v)), want)
          << v << " in [" << lo.value_or(-99999) << ", " << hi.value_or(99999) << "]";
    }
    EXPECT_FALSE(grammar_accepts(t, "-0"));
    EXPECT_FALSE(grammar_accepts(t, "007"));
  }
}

TEST(JsonSchema, ErrorsNameKeywordAndPath) {
  struct Case {
    const char* schema;
    ErrorCode code;
    const char* needle;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})",
       ErrorCode::grammar_unsupported, "'uniqueItems' at '/properties/a/uniqueItems'"},
      {R"({"type":"number","minimum":0})", ErrorCode::grammar_unsupported, "'minimum'"},
      {R"({"type":"string","format":"hostname"})", ErrorCode::grammar_unsupported, "hostname"},
      {R"({"patternProperties":{}})", ErrorCode::grammar_unsupported, "patternProperties"},
      {R"({"$ref":"#/$defs/missing"})", ErrorCode::grammar_bad_input, "does not resolve"},
      {R"({"type":"strin"})", ErrorCode::grammar_bad_input, "unknown type 'strin'"},
      {R"({"type":"string","pattern":"a(b"})", ErrorCode::grammar_bad_input, "/pattern"},
      {R"({"type":"object","properties":{"x":{"$ref":"#"}},"required":["x"]})", ErrorCode::grammar_empty,
       "empty"},
      {R"({"type":"integer","minimum":5,"maximum":4})", ErrorCode::grammar_empty, "empty"},
      {"false", ErrorCode::grammar_empty, "matches nothing"},
      {"{not json", ErrorCode::grammar_bad_input, "not JSON"},
      {R"({"type":"string","maxLength":100000})", ErrorCode::grammar_too_large, "limit"},
  };
  for (const Case& c : cases) {
    Result<Grammar> g = compile_json_schema(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.status().code(), c.code) << c.schema << ": " << g.status().message();
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos)
        << c.schema << ": " << g.status().message();
  }
}

TEST(JsonSchema, AnyObject) {
  Result<Grammar> g = compile_any_json_object();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(grammar_accepts(*g, R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_TRUE(grammar_accepts(*g, "{}"));
  EXPECT_FALSE(grammar_accepts(*g, "[]"));
  EXPECT_FALSE(grammar_accepts(*g, "{\"a\"}"));
}

}  // namespace
}  // namespace ds::grammar
