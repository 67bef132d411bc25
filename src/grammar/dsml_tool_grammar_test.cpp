// The strict tool-call grammar: a hand-written V4 block is accepted and broken ones are not; random
// texts sampled from the grammar (a random allowed byte at each step) are parsed back as DSML by the
// test and their arguments checked against the tools' schemas by hand; V4.1 tags; errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "grammar/dsml_tool_grammar.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

const std::string D = "｜DSML｜";

std::string spec(bool after_marker, const std::string& tags = "V4") {
  nlohmann::ordered_json s;
  s["marker"] = D;
  s["calls"] = tags == "V4" ? "tool_calls" : " calls";
  s["invoke"] = tags == "V4" ? "invoke" : " invoke";
  s["parameter"] = tags == "V4" ? "parameter" : " parameter";
  s["after_marker"] = after_marker;
  s["tools"] = nlohmann::ordered_json::parse(R"([
    {"name": "get_weather", "strict": true, "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "description": "a city"},
                     "days": {"type": "integer", "minimum": 1, "maximum": 7},
                     "units": {"enum": ["metric", "imperial"]},
                     "where": {"$ref": "#/$defs/point"}},
      "required": ["city", "days"], "additionalProperties": false,
      "$defs": {"point": {"type": "object", "properties": {"lat": {"type": "integer", "minimum": -90, "maximum": 90}}, "required": ["lat"]}}}},
    {"name": "log", "strict": false, "parameters": {"type": "object"}}])");
  return s.dump();
}

std::string param(const std::string& tag, const std::string& k, bool raw, const std::string& v) {
  return "<" + D + tag + " name=\"" + k + "\" string=\"" + (raw ? "true" : "false") + "\">" + v + "</" + D +
         tag + ">";
}

std::string block(const std::string& invokes) { return invokes + "\n</" + D + "tool_calls>"; }
std::string invoke(const std::string& name, const std::string& params) {
  return "<" + D + "invoke name=\"" + name + "\">\n" + params + "\n</" + D + "invoke>";
}

TEST(DsmlToolGrammar, AcceptsValidBlocksAndRejectsBrokenOnes) {
  Result<Grammar> g = compile_dsml_tool_calls(spec(false));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const std::string ok1 = block(invoke("get_weather", param("parameter", "city", true, "Paris, France") +
                                                          "\n" + param("parameter", "days", false, "3")));
  EXPECT_TRUE(testing::grammar_accepts(*g, ok1)) << ok1;
  const std::string ok2 =
      block(invoke("get_weather", param("parameter", "city", true, "東京") + "\n" +
                                      param("parameter", "days", false, "7") + "\n" +
                                      param("parameter", "units", false, "\"metric\"") + "\n" +
                                      param("parameter", "where", false, "{\"lat\":35}")) +
            "\n" +
            invoke("log", param("parameter", "anything", true, "free text") + "\n" +
                              param("parameter", "n", false, "[1,{\"a\":null}]")));
  EXPECT_TRUE(testing::grammar_accepts(*g, ok2)) << ok2;
  for (const std::string& bad : {
           block(invoke("get_weather", param("parameter", "city", true, "Paris"))),  // days is required
           block(invoke("get_weather", param("parameter", "city", true, "Paris") + "\n" +
                                           param("parameter", "days", false, "9"))),  // over the maximum
           block(
               invoke("get_weather", param("parameter", "days", false, "3") + "\n" +
                                         param("parameter", "city", true, "Paris"))),  // out of schema order
           block(invoke("get_weather", param("parameter", "city", true, "a<b") + "\n" +
                                           param("parameter", "days", false, "3"))),  // '<' in a raw value
           block(invoke("get_weather", param("parameter", "city", true, "Paris") + "\n" +
                                           param("parameter", "days", false, "3") + "\n" +
                                           param("parameter", "extra", false, "1"))),  // not a property
           block(invoke("other", "")),                                                 // not a tool
       })
    EXPECT_FALSE(testing::grammar_accepts(*g, bad)) << bad;
  // after_marker: the text starts right after the first "<｜DSML｜".
  Result<Grammar> after = compile_dsml_tool_calls(spec(true));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(testing::grammar_accepts(*after, "tool_calls>\n" + ok1));
  EXPECT_FALSE(testing::grammar_accepts(*after, ok1));
  // V4.1 tags have a leading space.
  Result<Grammar> v41 = compile_dsml_tool_calls(spec(false, "V41"));
  ASSERT_TRUE(v41.ok());
  std::string ok41 = "<" + D + " invoke name=\"log\">\n\n</" + D + " invoke>\n</" + D + " calls>";
  EXPECT_TRUE(testing::grammar_accepts(*v41, ok41)) << ok41;
}

// A random text of the grammar: a random allowed byte per step, now and then the first allowed one of
// "<\">}]\n" so that values close; stops once accepting and nothing follows (or by chance).
std::string sample(const ParserTables& tables, std::mt19937& rng) {
  EarleyParser p(tables);
  std::string out;
  const std::string closing = "<\"}]\n>0";
  while (out.size() < 20000) {
    std::vector<uint8_t> allowed;
    for (int b = 0; b < 256; ++b) {
      if (!p.push_byte(static_cast<uint8_t>(b))) continue;
      p.pop_to(p.n_sets() - 1);
      allowed.push_back(static_cast<uint8_t>(b));
    }
    if (allowed.empty()) break;
    uint8_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
      for (char c : closing)
        if (std::find(allowed.begin(), allowed.end(), static_cast<uint8_t>(c)) != allowed.end()) {
          pick = static_cast<uint8_t>(c);
          break;
        }
    p.push_byte(pick);
    out += static_cast<char>(pick);
  }
  EXPECT_TRUE(p.is_accepting()) << "a sample did not finish: " << out.substr(0, 300);
  return out;
}

TEST(DsmlToolGrammar, SampledBlocksParseAndFollowTheSchemas) {
  Result<Grammar> g = compile_dsml_tool_calls(spec(false));
  ASSERT_TRUE(g.ok());
  const ParserTables tables = ParserTables::build(*g);
  std::mt19937 rng(11);
  const std::regex invoke_re("<" + D + "invoke name=\"([^\"]*)\">\n([\\s\\S]*?)\n</" + D + "invoke>");
  const std::regex param_re("<" + D + "parameter name=\"([^\"]*)\" string=\"(true|false)\">([^<]*)</" + D +
                            "parameter>");
  int n_weather = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string text = sample(tables, rng);
    ASSERT_TRUE(text.ends_with("\n</" + D + "tool_calls>")) << text;
    int n_invokes = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), invoke_re); it != std::sregex_iterator();
         ++it) {
      ++n_invokes;
      const std::string name = (*it)[1], body = (*it)[2];
      nlohmann::json args = nlohmann::json::object();
      for (auto p = std::sregex_iterator(body.begin(), body.end(), param_re); p != std::sregex_iterator();
           ++p) {
        const std::string v = (*p)[3];
        args[(*p)[1].str()] = (*p)[2] == "true" ? nlohmann::json(v) : nlohmann::json::parse(v);
      }
      ASSERT_TRUE(name == "get_weather" || name == "log") << name;
      if (name != "get_weather") continue;
      ++n_weather;
      ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << args.dump();
      ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << args.dump();
      EXPECT_GE(args["days"].get<int64_t>(), 1);
      EXPECT_LE(args["days"].get<int64_t>(), 7);
      if (args.contains("units")) {
        EXPECT_TRUE(args["units"] == "metric" || args["units"] == "imperial");
      }
      if (args.contains("where")) {
        EXPECT_TRUE(args["where"]["lat"].is_number_integer()) << args.dump();
      }
      for (auto& [k, v] : args.items())
        EXPECT_TRUE(k == "city" || k == "days" || k == "units" || k == "where") << k;
    }
    EXPECT_GE(n_invokes, 1) << text;
  }
  EXPECT_GT(n_weather, 5);
}

TEST(DsmlToolGrammar, Errors) {
  EXPECT_EQ(compile_dsml_tool_calls("not json").status().code(), ErrorCode::grammar_bad_input);
  EXPECT_EQ(compile_dsml_tool_calls(R"({"marker":"m","calls":"c","invoke":"i","parameter":"p","tools":[]})")
                .status()
                .code(),
            ErrorCode::grammar_bad_input);
  Result<Grammar> st = compile_dsml_tool_calls(
      R"({"marker":"m","calls":"c","invoke":"i","parameter":"p","tools":[{"name":"f","strict":true,
          "parameters":{"type":"object","properties":{"x":{"type":"string","uniqueItems":true}}}}]})");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), ErrorCode::grammar_unsupported);
  EXPECT_NE(st.status().message().find("tool 'f'"), std::string::npos) << st.status().message();
  EXPECT_NE(st.status().message().find("/properties/x/uniqueItems"), std::string::npos)
      << st.status().message();
  Result<Grammar> arr = compile_dsml_tool_calls(
      R"({"marker":"m","calls":"c","invoke":"i","parameter":"p","tools":[{"name":"f","strict":true,
          "parameters":{"type":"array"}}]})");
  EXPECT_EQ(arr.status().code(), ErrorCode::grammar_unsupported);
}

}  // namespace
}  // namespace ds::grammar
