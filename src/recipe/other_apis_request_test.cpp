// Anthropic Messages, OpenAI Responses and OpenAI Completions conversion: fields land where the
// encodings expect them, and every error names its field path in that API's own terms.
#include <gtest/gtest.h>

#include <string>

#include "recipe/anthropic_messages_request.h"
#include "recipe/completions_request.h"
#include "recipe/encoding.h"
#include "recipe/recipe_test_util.h"
#include "recipe/request_error.h"
#include "recipe/responses_request.h"

namespace ds::recipe {
namespace {

template <class T>
void expect_error_at(const Result<T>& r, const std::string& path, const std::string& fragment = "") {
  ASSERT_FALSE(r.ok()) << "accepted";
  EXPECT_EQ(error_field_path(r.status()), path) << r.status().message();
  if (!fragment.empty()) {
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

// ---- Anthropic Messages ---------------------------------------------------------------------

Result<ChatRequest> anthropic(const std::string& body) { return parse_anthropic_messages_request(body, {}); }

TEST(AnthropicMessagesRequest, ConvertsBlocksToMessages) {
  Result<ChatRequest> r = anthropic(R"({"model":"claude-x","max_tokens":256,
    "system":[{"type":"text","text":"S1"},{"type":"text","text":"S2"}],
    "stop_sequences":["END"],"temperature":0.3,"top_k":5,"metadata":{"user_id":"u"},
    "thinking":{"type":"enabled","budget_tokens":1024},
    "tools":[{"name":"get","description":"d","input_schema":{"type":"object","properties":{"k":{"type":"string"}}}}],
    "messages":[
      {"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},
                                     {"type":"text","text":"checking"},
                                     {"type":"tool_use","id":"t1","name":"get","input":{"k":"v"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"R"}]},
                                {"type":"text","text":"thanks"}]}]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->api, ApiKind::anthropic_messages);
  ASSERT_EQ(r->messages.size(), 5u);
  EXPECT_EQ(r->messages[0].role, Role::system);
  EXPECT_EQ(r->messages[0].content, "S1\n\nS2");
  EXPECT_EQ(r->messages[2].reasoning_content, "hmm");
  EXPECT_EQ(r->messages[2].content, "checking");
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments_json, R"({"k":"v"})");
  EXPECT_EQ(r->messages[3].role, Role::tool);
  EXPECT_EQ(r->messages[3].tool_call_id, "t1");
  EXPECT_EQ(r->messages[3].content, "R");
  EXPECT_EQ(r->messages[4].content, "thanks");
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(*r->thinking_budget_tokens, 1024);
  EXPECT_EQ(r->tools[0].parameters_json, R"({"type":"object","properties":{"k":{"type":"string"}}})");
  EXPECT_EQ(r->sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(*r->sampling.top_k, 5);
  EXPECT_EQ(r->user, "u");
  // It renders: the tool result and the text share the user turn after the call (V4.1).
  EncodingOptions options;
  Result<RenderedPrompt> prompt = render_prompt(*r, options);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  const std::string text = prompt->text();
  const std::string tail = "<｜User｜><tool_result>R</tool_result>\n\nthanks<｜Assistant｜><think>";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
}

TEST(AnthropicMessagesRequest, ThinkingAndEffort) {
  const std::string msgs = R"("messages":[{"role":"user","content":"q"}])";
  EXPECT_FALSE(
      anthropic(R"({"model":"m","max_tokens":1,"thinking":{"type":"disabled"},)" + msgs + "}")->thinking);
  Result<ChatRequest> r =
      anthropic(R"({"model":"m","max_tokens":1,"output_config":{"effort":"max"},)" + msgs + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(r->reasoning_effort, ReasoningEffort::max);
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"output_config":{"effort":"huge"},)" + msgs + "}"),
                  "output_config.effort");
  expect_error_at(
      anthropic(R"({"model":"m","max_tokens":1,"thinking":{"type":"enabled","budget_tokens":0},)" + msgs +
                "}"),
      "thinking.budget_tokens");
}

TEST(AnthropicMessagesRequest, ErrorsNameTheField) {
  const std::string msgs = R"("messages":[{"role":"user","content":"q"}])";
  expect_error_at(anthropic(R"({"model":"m",)" + msgs + "}"), "max_tokens", "required");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":0,)" + msgs + "}"), "max_tokens");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"temperature":1.5,)" + msgs + "}"), "temperature",
                  "[0, 1]");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"system":5,)" + msgs + "}"), "system");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]})"),
                  "messages[0].role", "system");
  expect_error_at(
      anthropic(
          R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"),
      "messages[0].content[0].type", "not supported");
  expect_error_at(
      anthropic(
          R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]})"),
      "messages[0].content[0].type", "role user");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":[]}]}]})"),
                  "messages[1].content[0].input", "expected object");
  // A tool_use with no tool_result in the next user message.
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
      {"role":"user","content":"no result"}]})"),
                  "messages[1]", "'t1'");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":"a"},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"zz","content":"r"}]}]})"),
                  "messages[2].content[0]", "must follow");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"tools":[{"name":"f"}],)" + msgs + "}"),
                  "tools[0].input_schema", "required");
  expect_error_at(
      anthropic(R"({"model":"m","max_tokens":1,"tools":[{"type":"web_search_20250305","name":"w"}],)" + msgs +
                "}"),
      "tools[0].type", "not supported");
  expect_error_at(
      anthropic(
          R"({"model":"m","max_tokens":1,"tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"disabled"},)" +
          msgs + "}"),
      "tool_choice", "'f'");
  // tool_choice any is "required": not with thinking.
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"tool_choice":{"type":"any"},
      "tools":[{"name":"f","input_schema":{"type":"object"}}],)" +
                            msgs + "}"),
                  "tool_choice", "thinking");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":1,"stop_sequences":"x",)" + msgs + "}"),
                  "stop_sequences");
}

TEST(AnthropicMessagesRequest, OutputFormatAndStrictTools) {
  const std::string msgs = R"("messages":[{"role":"user","content":"q"}])";
  // GA shape: output_config.format, beside the effort.
  Result<ChatRequest> r = anthropic(R"({"model":"m","max_tokens":8,"output_config":{"effort":"high",
      "format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},)" +
                                    msgs + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->response_format.kind, ResponseFormatKind::json_schema);
  EXPECT_EQ(r->response_format.field, "output_config.format.schema");
  EXPECT_EQ(Json::parse(r->response_format.schema_json)["properties"]["a"]["type"], "integer");
  EXPECT_TRUE(r->response_format.strict);
  // The structured-outputs beta's top-level output_format.
  r = anthropic(
      R"({"model":"m","max_tokens":8,"output_format":{"type":"json_schema","schema":{"type":"array"}},)" +
      msgs + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->response_format.field, "output_format.schema");
  // Without either: no constraint.
  EXPECT_EQ(anthropic(R"({"model":"m","max_tokens":8,)" + msgs + "}")->response_format.kind,
            ResponseFormatKind::text);
  expect_error_at(anthropic(R"({"model":"m","max_tokens":8,"output_format":{"type":"json_schema","schema":{}},
      "output_config":{"format":{"type":"json_schema","schema":{}}},)" +
                            msgs + "}"),
                  "output_format", "not both");
  expect_error_at(
      anthropic(R"({"model":"m","max_tokens":8,"output_config":{"format":{"type":"text"}},)" + msgs + "}"),
      "output_config.format.type", "json_schema");
  expect_error_at(
      anthropic(R"({"model":"m","max_tokens":8,"output_config":{"format":{"type":"json_schema"}},)" + msgs +
                "}"),
      "output_config.format.schema");
  expect_error_at(anthropic(R"({"model":"m","max_tokens":8,"output_format":"json",)" + msgs + "}"),
                  "output_format");
  // strict: true on a tool marks it for constrained arguments.
  r = anthropic(R"({"model":"m","max_tokens":8,"tools":[
      {"name":"f","strict":true,"input_schema":{"type":"object"}},{"name":"g","input_schema":{"type":"object"}}],)" +
                msgs + "}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_TRUE(r->tools[0].strict);
  EXPECT_FALSE(r->tools[1].strict);
  expect_error_at(anthropic(R"({"model":"m","max_tokens":8,"tools":[
      {"name":"f","strict":"yes","input_schema":{"type":"object"}}],)" +
                            msgs + "}"),
                  "tools[0].strict");
}

// ---- OpenAI Responses ------------------------------------------------------------------------

Result<ChatRequest> responses(const std::string& body) { return parse_responses_request(body, {}); }

TEST(ResponsesRequest, StringInputAndInstructions) {
  Result<ChatRequest> r = responses(R"({"model":"m","instructions":"be brief","input":"hello",
      "reasoning":{"effort":"low"},"max_output_tokens":50,"text":{"format":{"type":"json_object"}},"store":true})");
  ASSERT_FALSE(r.ok());  // json_object without the word json
  EXPECT_EQ(error_field_path(r.status()), "text.format");
  r = responses(R"({"model":"m","instructions":"answer in json","input":"hello","reasoning":{"effort":"low"},
      "max_output_tokens":50,"text":{"format":{"type":"json_object"}},"store":true})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, Role::system);
  EXPECT_EQ(r->messages[1].content, "hello");
  EXPECT_TRUE(r->thinking);
  EXPECT_EQ(r->reasoning_effort, ReasoningEffort::low);
  EXPECT_EQ(*r->sampling.max_tokens, 50);
  EXPECT_EQ(r->response_format.kind, ResponseFormatKind::json_object);
  EXPECT_FALSE(responses(R"({"model":"m","input":"x","reasoning":{"effort":"none"}})")->thinking);
}

TEST(ResponsesRequest, ItemsBecomeOneAssistantTurnPerModelTurn) {
  Result<ChatRequest> r = responses(R"({"model":"m","input":[
      {"role":"user","content":"q"},
      {"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},
      {"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},
      {"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
      {"type":"function_call_output","call_id":"c2","output":"r2"},
      {"type":"function_call_output","call_id":"c1","output":"r1"}],
    "tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object"}},{"type":"web_search"}]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[1].role, Role::assistant);
  EXPECT_EQ(r->messages[1].reasoning_content, "think");
  EXPECT_EQ(r->messages[1].content, "calling");
  ASSERT_EQ(r->messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(r->messages[2].tool_call_id, "c2");
  ASSERT_EQ(r->tools.size(), 1u);  // web_search ignored
  EXPECT_TRUE(r->tools[0].strict);
}

TEST(ResponsesRequest, ErrorsNameTheField) {
  expect_error_at(responses(R"({"model":"m"})"), "input", "required");
  expect_error_at(responses(R"({"model":"m","input":5})"), "input", "expected string or array");
  expect_error_at(responses(R"({"model":"m","input":[]})"), "input", "at least one");
  expect_error_at(responses(R"({"model":"m","input":"x","previous_response_id":"resp_1"})"),
                  "previous_response_id", "stateless");
  expect_error_at(responses(R"({"model":"m","input":[{"type":"item_reference","id":"x"}]})"),
                  "input[0].type");
  expect_error_at(responses(R"({"model":"m","input":[{"role":"tool","content":"x"}]})"), "input[0].role");
  expect_error_at(responses(R"({"model":"m","input":[{"role":"user","content":"q"},
      {"type":"function_call","call_id":"c1","name":"f","arguments":"nope"}]})"),
                  "input[1].arguments", "invalid JSON");
  expect_error_at(responses(R"({"model":"m","input":[{"role":"user","content":"q"},
      {"type":"function_call_output","call_id":"c1","output":"r"}]})"),
                  "input[1]", "must follow");
  expect_error_at(responses(R"({"model":"m","input":[{"type":"reasoning","encrypted_content":"xx"}]})"),
                  "input[0].encrypted_content");
  expect_error_at(responses(R"({"model":"m","input":"x","tools":[{"type":"file_search"}]})"),
                  "tools[0].type");
  expect_error_at(responses(R"({"model":"m","input":"x","max_output_tokens":0})"), "max_output_tokens");
  expect_error_at(responses(R"({"model":"m","input":"x","text":{"format":{"type":"grammar"}}})"),
                  "text.format.type");
  expect_error_at(responses(R"({"model":"m","input":"x","reasoning":{"effort":"huge"}})"),
                  "reasoning.effort");
}

// ---- OpenAI Completions ----------------------------------------------------------------------

Result<CompletionRequest> completions(const std::string& body) { return parse_completions_request(body, {}); }

TEST(CompletionsRequest, PromptForms) {
  Result<CompletionRequest> r =
      completions(R"({"model":"m","prompt":"hello","echo":true,"logprobs":2,"max_tokens":8})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r->prompt_text, "hello");
  EXPECT_TRUE(r->echo);
  EXPECT_TRUE(r->sampling.logprobs);
  EXPECT_EQ(*r->sampling.top_logprobs, 2);
  EXPECT_EQ(*completions(R"({"model":"m","prompt":["hi"]})")->prompt_text, "hi");
  EXPECT_EQ(completions(R"({"model":"m","prompt":[1,2,3]})")->prompt_token_ids,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(completions(R"({"model":"m","prompt":[[4,5]]})")->prompt_token_ids, (std::vector<int32_t>{4, 5}));
  expect_error_at(completions(R"({"model":"m"})"), "prompt", "required");
  expect_error_at(completions(R"({"model":"m","prompt":["a","b"]})"), "prompt", "one prompt");
  expect_error_at(completions(R"({"model":"m","prompt":[1,-2]})"), "prompt[1]", "token id");
  expect_error_at(completions(R"({"model":"m","prompt":[[]]})"), "prompt[0]");
  expect_error_at(completions(R"({"model":"m","prompt":"a","suffix":"b"})"), "suffix", "not supported");
  expect_error_at(completions(R"({"model":"m","prompt":"a","best_of":2})"), "best_of");
  expect_error_at(completions(R"({"model":"m","prompt":"a","logprobs":true})"), "logprobs", "integer");
  expect_error_at(completions(R"({"model":"m","prompt":"a","n":9})"), "n", "1 to 8");
  EXPECT_EQ(completions(R"({"model":"m","prompt":"a","n":3})")->sampling.n, 3);
}

TEST(CompletionsRequest, EncodingAddsExactlyOneBos) {
  const Tokenizer tok = testing::marker_tokenizer();
  const int32_t bos = *tok.token_to_id("<｜begin▁of▁sentence｜>");
  // The fixture's config-less tokenizer has no BOS id: use one that has it via tokenizer_config.
  nlohmann::json config = {{"add_bos_token", true}, {"bos_token", "<｜begin▁of▁sentence｜>"}};
  nlohmann::json root = nlohmann::json::parse(ds::testing::tiny_tokenizer_json());
  root["added_tokens"].push_back({{"id", bos},
                                  {"content", "<｜begin▁of▁sentence｜>"},
                                  {"single_word", false},
                                  {"lstrip", false},
                                  {"rstrip", false},
                                  {"normalized", false},
                                  {"special", true}});
  Result<Tokenizer> with_bos = Tokenizer::from_json(root.dump(), config.dump(), "bos");
  ASSERT_TRUE(with_bos.ok()) << with_bos.status().to_string();
  ASSERT_EQ(with_bos->bos_id(), bos);
  Result<CompletionRequest> plain = completions(R"({"model":"m","prompt":"hello"})");
  Result<std::vector<int32_t>> ids = encode_completion_prompt(*plain, *with_bos);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), bos);
  EXPECT_EQ(std::vector<int32_t>(ids->begin() + 1, ids->end()), *with_bos->encode("hello"));
  // A prompt that already starts with the BOS text keeps a single BOS.
  Result<CompletionRequest> leading = completions(R"({"model":"m","prompt":"<｜begin▁of▁sentence｜>hello"})");
  ids = encode_completion_prompt(*leading, *with_bos);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(std::count(ids->begin(), ids->end(), bos), 1);
  EXPECT_EQ(ids->front(), bos);
  // Token-id prompts pass through untouched.
  Result<CompletionRequest> raw = completions(R"({"model":"m","prompt":[7,8]})");
  EXPECT_EQ(*encode_completion_prompt(*raw, *with_bos), (std::vector<int32_t>{7, 8}));
}

}  // namespace
}  // namespace ds::recipe
