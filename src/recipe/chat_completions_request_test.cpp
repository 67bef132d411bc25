// Chat Completions conversion: accepted fields land in the ChatRequest, DeepSeek's rules
// (features spec §10.3) are enforced, and every error names the offending field path.
#include "recipe/chat_completions_request.h"

#include <gtest/gtest.h>

#include <string>

#include "recipe/request_error.h"

namespace ds::recipe {
namespace {

Result<ChatRequest> parse(const std::string& body, const ConversionOptions& options = {}) {
  return parse_chat_completions_request(body, options);
}

// The status message must start with "PATH: "; returns the message for further checks.
void expect_error_at(const std::string& body, const std::string& path, const std::string& fragment = "",
                     const ConversionOptions& options = {}) {
  Result<ChatRequest> r = parse(body, options);
  ASSERT_FALSE(r.ok()) << "accepted: " << body;
  EXPECT_EQ(error_field_path(r.status()), path) << r.status().message();
  if (!fragment.empty()) {
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

const std::string kUserHi = R"("messages":[{"role":"user","content":"hi"}])";

TEST(ChatCompletionsRequest, AcceptsTheDocumentedFields) {
  Result<ChatRequest> r = parse(R"({"model":"deepseek-chat","messages":[
      {"role":"system","content":"s"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "temperature":0.5,"top_p":0.9,"max_tokens":100,"stop":["x","y"],"seed":7,"presence_penalty":1,
    "frequency_penalty":-1,"logprobs":true,"top_logprobs":3,"n":3,"stream":true,
    "stream_options":{"include_usage":true},"user":"u1","thinking":{"type":"disabled"},
    "response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"},"strict":true}},
    "unknown_field":123})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "deepseek-chat");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_EQ(r->messages[1].source_path, "messages[1]");
  EXPECT_EQ(*r->sampling.temperature, 0.5);
  EXPECT_EQ(*r->sampling.top_p, 0.9);
  EXPECT_EQ(*r->sampling.max_tokens, 100);
  EXPECT_EQ(r->sampling.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*r->sampling.seed, 7);
  EXPECT_EQ(r->sampling.presence_penalty, 1.0);
  EXPECT_EQ(r->sampling.frequency_penalty, -1.0);
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(*r->sampling.top_logprobs, 3);
  EXPECT_EQ(r->sampling.n, 3);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->user, "u1");
  EXPECT_FALSE(r->thinking);
  EXPECT_EQ(r->response_format.kind, ResponseFormatKind::json_schema);
  EXPECT_EQ(r->response_format.schema_name, "r");
  EXPECT_EQ(r->response_format.schema_json, R"({"type":"object"})");
  EXPECT_TRUE(r->response_format.strict);
}

TEST(ChatCompletionsRequest, ThinkingResolution) {
  // Default: on, effort high.
  Result<ChatRequest> r = parse(R"({"model":"m",)" + kUserHi + "}");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->thinking);
  EXPECT_FALSE(r->thinking_explicit);
  EXPECT_EQ(r->reasoning_effort, ReasoningEffort::high);
  // A server default of off (e.g. for V3).
  ConversionOptions off;
  off.default_thinking = false;
  EXPECT_FALSE(parse(R"({"model":"m",)" + kUserHi + "}", off)->thinking);
  // Effort "none" turns thinking off, any other effort turns it on.
  EXPECT_FALSE(parse(R"({"model":"m","reasoning_effort":"none",)" + kUserHi + "}")->thinking);
  r = parse(R"({"model":"m","reasoning_effort":"medium",)" + kUserHi + "}", off);
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(r->reasoning_effort, ReasoningEffort::high);
  EXPECT_EQ(parse(R"({"model":"m","reasoning_effort":"minimal",)" + kUserHi + "}")->reasoning_effort,
            ReasoningEffort::low);
  EXPECT_EQ(parse(R"({"model":"m","reasoning_effort":"ultra",)" + kUserHi + "}")->reasoning_effort,
            ReasoningEffort::max);
  // The explicit switch wins over the effort; "adaptive" is an alias of enabled.
  EXPECT_FALSE(
      parse(R"({"model":"m","thinking":{"type":"disabled"},"reasoning_effort":"max",)" + kUserHi + "}")
          ->thinking);
  EXPECT_TRUE(
      parse(R"({"model":"m","thinking":{"type":"adaptive"},"reasoning_effort":"none",)" + kUserHi + "}")
          ->thinking);
  expect_error_at(R"({"model":"m","reasoning_effort":"extreme",)" + kUserHi + "}", "reasoning_effort",
                  "extreme");
  expect_error_at(R"({"model":"m","thinking":{"type":"on"},)" + kUserHi + "}", "thinking.type");
}

TEST(ChatCompletionsRequest, BodyAndTopLevelErrorsNameTheField) {
  expect_error_at("{not json", "body", "invalid JSON");
  expect_error_at("[1]", "body", "expected object");
  expect_error_at(R"({)" + kUserHi + "}", "model", "required");
  expect_error_at(R"({"model":"m"})", "messages", "required");
  expect_error_at(R"({"model":"m","messages":[]})", "messages", "at least one");
  expect_error_at(R"({"model":"m","messages":{}})", "messages", "expected array");
}

TEST(ChatCompletionsRequest, MessageErrorsNameTheField) {
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":5}]})",
                  "messages[1].content", "expected string or array, got number");
  expect_error_at(R"({"model":"m","messages":[{"role":"robot","content":"a"}]})", "messages[0].role",
                  "robot");
  expect_error_at(R"({"model":"m","messages":[{"content":"a"}]})", "messages[0].role", "required");
  expect_error_at(R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content", "required");
  expect_error_at(
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
      "messages[0].content[0].type", "not supported");
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})",
                  "messages[0].content[0].text", "required");
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":"a","reasoning_content":"r"}]})",
                  "messages[0].reasoning_content", "only on assistant");
  expect_error_at(R"({"model":"m","messages":[{"role":"latest_reminder","content":[]}]})",
                  "messages[0].content", "expected string");
}

TEST(ChatCompletionsRequest, SamplingRanges) {
  const auto body = [](const std::string& field) { return R"({"model":"m",)" + field + "," + kUserHi + "}"; };
  expect_error_at(body(R"("temperature":2.5)"), "temperature", "[0, 2]");
  expect_error_at(body(R"("temperature":"hot")"), "temperature", "expected number");
  expect_error_at(body(R"("top_p":0)"), "top_p", "(0, 1]");
  expect_error_at(body(R"("presence_penalty":-2.5)"), "presence_penalty");
  expect_error_at(body(R"("frequency_penalty":3)"), "frequency_penalty");
  expect_error_at(body(R"("max_tokens":0)"), "max_tokens", "at least 1");
  expect_error_at(body(R"("max_tokens":1.5)"), "max_tokens", "expected integer");
  expect_error_at(body(R"("max_completion_tokens":1000000000)"), "max_completion_tokens", "at most");
  expect_error_at(body(R"("n":0)"), "n", "1 to 8");
  expect_error_at(body(R"("n":9)"), "n", "--max-choices");
  expect_error_at(body(R"("n":1.5)"), "n", "expected integer");
  expect_error_at(body(R"("seed":9223372036854775808)"), "seed", "2^63");
  expect_error_at(body(R"("top_logprobs":3)"), "top_logprobs", "requires logprobs");
  expect_error_at(body(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs");
  expect_error_at(body(R"("stream_options":{"include_usage":true})"), "stream_options", "stream is true");
  expect_error_at(body(R"("logit_bias":{"1":5})"), "logit_bias", "not supported");
  expect_error_at(body(R"("functions":[])"), "functions", "not supported");
  expect_error_at(body(R"("response_format":{"type":"regex"})"), "response_format.type", "only text");
  // max_completion_tokens wins over max_tokens; 100.0 is an integer.
  Result<ChatRequest> r = parse(body(R"("max_tokens":5,"max_completion_tokens":100.0)"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r->sampling.max_tokens, 100);
}

TEST(ChatCompletionsRequest, StopSequences) {
  const auto with_stop = [](const std::string& stop) {
    return R"({"model":"m","stop":)" + stop + "," + kUserHi + "}";
  };
  Result<ChatRequest> r = parse(with_stop(R"("END")"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sampling.stop, std::vector<std::string>{"END"});
  std::string sixteen = "[";
  for (int i = 0; i < 16; ++i) sixteen += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  EXPECT_TRUE(parse(with_stop(sixteen + "]")).ok());
  expect_error_at(with_stop(sixteen + ",\"s16\"]"), "stop", "at most 16");
  expect_error_at(with_stop(R"(["a",""])"), "stop[1]", "empty");
  expect_error_at(with_stop(R"(["a",1])"), "stop[1]", "expected string");
  expect_error_at(with_stop("[\"" + std::string(257, 'x') + "\"]"), "stop[0]", "256 bytes");
  expect_error_at(with_stop("3"), "stop");
}

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},
                {"type":"function","function":{"name":"g"}}])";

TEST(ChatCompletionsRequest, ToolRules) {
  Result<ChatRequest> r = parse(R"({"model":"m",)" + kTools + "," + kUserHi + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0].parameters_json, R"({"type":"object"})");
  EXPECT_EQ(r->tools[1].parameters_json, "");
  // A named choice keeps only that tool (thinking off: forced calls need non-thinking mode).
  r = parse(
      R"({"model":"m","thinking":{"type":"disabled"},"tool_choice":{"type":"function","function":{"name":"g"}},)" +
      kTools + "," + kUserHi + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0].name, "g");
  EXPECT_EQ(r->tool_choice.kind, ToolChoiceKind::named);
  expect_error_at(R"({"model":"m","tool_choice":"required",)" + kTools + "," + kUserHi + "}", "tool_choice",
                  "thinking");
  expect_error_at(
      R"({"model":"m","thinking":{"type":"disabled"},"tool_choice":{"type":"function","function":{"name":"h"}},)" +
          kTools + "," + kUserHi + "}",
      "tool_choice", "'h'");
  expect_error_at(R"({"model":"m","thinking":{"type":"disabled"},"tool_choice":"required",)" + kUserHi + "}",
                  "tool_choice", "no tools");
  expect_error_at(R"({"model":"m","tool_choice":"sometimes",)" + kUserHi + "}", "tool_choice", "sometimes");
  expect_error_at(
      R"({"model":"m","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],)" +
          kUserHi + "}",
      "tools[1].name", "duplicate");
  expect_error_at(
      R"({"model":"m","tools":[{"type":"function","function":{"name":"bad name"}}],)" + kUserHi + "}",
      "tools[0].function.name");
  expect_error_at(R"({"model":"m","tools":[{"type":"retrieval"}],)" + kUserHi + "}", "tools[0].type",
                  "only function");
  expect_error_at(R"({"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":[]}}],)" +
                      kUserHi + "}",
                  "tools[0].function.parameters", "expected object");
  ConversionOptions few;
  few.limits.max_tools = 1;
  expect_error_at(R"({"model":"m",)" + kTools + "," + kUserHi + "}", "tools", "at most 1", few);
}

TEST(ChatCompletionsRequest, ToolStrict) {
  Result<ChatRequest> r = parse(
      R"({"model":"m","tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object"}}},
                               {"type":"function","function":{"name":"g","strict":false}},
                               {"type":"function","function":{"name":"h"}}],)" +
      kUserHi + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tools.size(), 3u);
  EXPECT_TRUE(r->tools[0].strict);
  EXPECT_FALSE(r->tools[1].strict);
  EXPECT_FALSE(r->tools[2].strict);
  expect_error_at(
      R"({"model":"m","tools":[{"type":"function","function":{"name":"f","strict":"yes"}}],)" + kUserHi + "}",
      "tools[0].function.strict");
}

TEST(ChatCompletionsRequest, ToolCallOrdering) {
  const std::string call = R"({"role":"assistant","content":null,"tool_calls":[
      {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
      {"id":"c2","type":"function","function":{"name":"g","arguments":"{\"a\":1}"}}]})";
  const std::string head = R"({"model":"m","messages":[{"role":"user","content":"q"},)" + call;
  // Both answered, in any order.
  Result<ChatRequest> r = parse(head + R"(,{"role":"tool","tool_call_id":"c2","content":"2"},
                                        {"role":"tool","tool_call_id":"c1","content":"1"}]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->messages[1].tool_calls[1].arguments_json, R"({"a":1})");
  expect_error_at(head + R"(,{"role":"tool","tool_call_id":"c1","content":"1"}]})", "messages[1]", "'c2'");
  expect_error_at(
      head + R"(,{"role":"tool","tool_call_id":"c1","content":"1"},{"role":"user","content":"x"}]})",
      "messages[1]", "'c2'");
  expect_error_at(head + R"(,{"role":"tool","tool_call_id":"c3","content":"1"}]})",
                  "messages[2].tool_call_id", "'c3'");
  expect_error_at(
      R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"c1","content":"1"}]})",
      "messages[1]", "must follow");
  expect_error_at(R"({"model":"m","messages":[{"role":"tool","content":"1"}]})", "messages[0].tool_call_id",
                  "required");
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[
      {"id":"c1","type":"function","function":{"name":"f","arguments":"{oops"}}]}]})",
                  "messages[1].tool_calls[0].function.arguments", "invalid JSON");
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[
      {"id":"c1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]})",
                  "messages[1].tool_calls[0].function.arguments", "JSON object");
  expect_error_at(R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[
      {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
      {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]})",
                  "messages[1].tool_calls[1].id", "duplicate");
  expect_error_at(
      R"({"model":"m","messages":[{"role":"assistant","content":"a","prefix":true},{"role":"user","content":"q"}]})",
      "messages[0].prefix", "last message");
}

TEST(ChatCompletionsRequest, JsonObjectNeedsTheWordJson) {
  expect_error_at(R"({"model":"m","response_format":{"type":"json_object"},)" + kUserHi + "}",
                  "response_format", "json");
  EXPECT_TRUE(
      parse(
          R"({"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"Answer in JSON"}]})")
          .ok());
  ConversionOptions lax;
  lax.require_json_word_for_json_object = false;
  EXPECT_TRUE(parse(R"({"model":"m","response_format":{"type":"json_object"},)" + kUserHi + "}", lax).ok());
}

TEST(RequestError, FieldPathIsRecoverable) {
  EXPECT_EQ(error_field_path(field_error("messages[2].content", "bad")), "messages[2].content");
  EXPECT_EQ(error_field_path(field_error("", "the request is bad: really")), "");
  EXPECT_EQ(field_error("a.b", "x").message(), "a.b: x");
  EXPECT_EQ(unsupported_error("n", "x").code(), kUnsupported);
}

}  // namespace
}  // namespace ds::recipe
