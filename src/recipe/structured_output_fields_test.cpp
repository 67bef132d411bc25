// The constraint fields of vLLM and SGLang land in ResponseFormat with the field they came from;
// response_format keeps its own; two constraints in one request are refused naming the second.
#include "recipe/structured_output_fields.h"

#include <gtest/gtest.h>

#include "recipe/chat_completions_request.h"
#include "recipe/completions_request.h"
#include "recipe/request_error.h"
#include "recipe/responses_request.h"

namespace ds::recipe {
namespace {

ResponseFormat chat_format(const std::string& extra) {
  Result<ChatRequest> r = parse_chat_completions_request(
      R"({"model":"m","messages":[{"role":"user","content":"json please"}],)" + extra + "}", {});
  EXPECT_TRUE(r.ok()) << extra << ": " << r.status().to_string();
  return r.ok() ? r->response_format : ResponseFormat{};
}

TEST(StructuredOutputFields, EachFieldMapsToItsKind) {
  ResponseFormat f = chat_format(R"("structured_outputs":{"regex":"a+"})");
  EXPECT_EQ(f.kind, ResponseFormatKind::regex);
  EXPECT_EQ(f.pattern, "a+");
  EXPECT_EQ(f.field, "structured_outputs.regex");
  f = chat_format(R"("guided_json":{"type":"object","properties":{"b":{},"a":{}}})");
  EXPECT_EQ(f.kind, ResponseFormatKind::json_schema);
  EXPECT_EQ(f.schema_json, R"({"type":"object","properties":{"b":{},"a":{}}})") << "key order kept";
  EXPECT_EQ(f.field, "guided_json");
  f = chat_format(R"("guided_json":"{\"type\":\"string\"}")");
  EXPECT_EQ(f.schema_json, R"({"type":"string"})");
  f = chat_format(R"("guided_choice":["x","y"])");
  EXPECT_EQ(f.kind, ResponseFormatKind::choice);
  EXPECT_EQ(f.choices, (std::vector<std::string>{"x", "y"}));
  f = chat_format(R"("ebnf":"root ::= \"a\"")");
  EXPECT_EQ(f.kind, ResponseFormatKind::grammar);
  EXPECT_EQ(f.field, "ebnf");
  f = chat_format(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"null"}}})");
  EXPECT_EQ(f.field, "response_format.json_schema.schema");
  f = chat_format(R"("response_format":{"type":"json_object"})");
  EXPECT_EQ(f.kind, ResponseFormatKind::json_object);
}

TEST(StructuredOutputFields, CompletionsAndResponsesToo) {
  Result<CompletionRequest> c = parse_completions_request(R"({"model":"m","prompt":"p","regex":"\\d+"})", {});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->response_format.kind, ResponseFormatKind::regex);
  EXPECT_EQ(c->response_format.pattern, "\\d+");
  Result<ChatRequest> r = parse_responses_request(
      R"({"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"integer"}}}})",
      {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->response_format.kind, ResponseFormatKind::json_schema);
  EXPECT_EQ(r->response_format.field, "text.format.schema");
}

TEST(StructuredOutputFields, Errors) {
  struct Case {
    std::string extra, path, fragment;
  };
  const Case cases[] = {
      {R"("guided_regex":"a","regex":"b")", "regex", "only one"},
      {R"("response_format":{"type":"json_object"},"guided_choice":["a"])", "guided_choice",
       "response_format"},
      {R"("structured_outputs":{"structural_tag":{}})", "structured_outputs.structural_tag", "not supported"},
      {R"("guided_regex":5)", "guided_regex", "expected string"},
      {R"("guided_choice":[])", "guided_choice", "non-empty"},
      {R"("guided_choice":["a",1])", "guided_choice[1]", "expected string"},
      {R"("guided_json":[1])", "guided_json", "JSON Schema"},
  };
  for (const Case& c : cases) {
    Result<ChatRequest> r = parse_chat_completions_request(
        R"({"model":"m","messages":[{"role":"user","content":"json"}],)" + c.extra + "}", {});
    ASSERT_FALSE(r.ok()) << c.extra;
    EXPECT_EQ(error_field_path(r.status()), c.path) << r.status().message();
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace ds::recipe
