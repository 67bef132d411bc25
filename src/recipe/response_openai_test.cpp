// Chat Completions and Completions builders against stream frames and bodies written by hand from
// features spec §10.5 (chunk shapes, DeepSeek usage) and OpenAI's documented formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipe/response_completions.h"
#include "recipe/response_openai_chat.h"
#include "recipe/response_test_util.h"
#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds::recipe {
namespace {

using nlohmann::json;
using testing::concat;
using testing::expect_frames;
using testing::sse_data_frames;

ResponseMeta meta() { return ResponseMeta{"chatcmpl-7", "deepseek-v4-flash", 1700000000, "fp_t"}; }

ResponseUsage usage() {
  ResponseUsage u;
  u.prompt_tokens = 10;
  u.prompt_cache_hit_tokens = 4;
  u.completion_tokens = 7;
  u.reasoning_tokens = 3;
  return u;
}

// The usage object of usage() as DeepSeek writes it.
const json kUsage = json::parse(R"({
  "prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17,
  "prompt_tokens_details": {"cached_tokens": 4},
  "prompt_cache_hit_tokens": 4, "prompt_cache_miss_tokens": 6,
  "completion_tokens_details": {"reasoning_tokens": 3}})");

json chunk(const json& delta, const json& finish_reason = nullptr, const json& usage_field = nullptr) {
  return json{
      {"id", "chatcmpl-7"},
      {"object", "chat.completion.chunk"},
      {"created", 1700000000},
      {"model", "deepseek-v4-flash"},
      {"system_fingerprint", "fp_t"},
      {"choices",
       json::array(
           {json{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}})},
      {"usage", usage_field}};
}

TEST(ChatCompletionsStream, ThinkingContentToolCallGolden) {
  ChatCompletionsStream s(meta(), ChatResponseOptions{.thinking = true, .include_usage = true});
  StreamEvents events = s.begin();
  events = concat(events, s.on_deltas({{OutputDeltaKind::reasoning, "Think", -1}}));
  events = concat(
      events, s.on_deltas({{OutputDeltaKind::reasoning, " more", -1}, {OutputDeltaKind::content, "Hi", -1}}));
  events = concat(events, s.on_deltas({{OutputDeltaKind::tool_call_start, "get", 0},
                                       {OutputDeltaKind::tool_call_arguments, R"({"q": "x)", 0}}));
  events = concat(events, s.on_deltas({{OutputDeltaKind::tool_call_arguments, R"("})", 0}}));
  events = concat(events, s.finish(OutputFinishReason::tool_calls, usage()));
  ASSERT_EQ(events.back(), done_event());
  expect_frames(
      sse_data_frames(events),
      {
          chunk(json::parse(R"({"role": "assistant", "content": null, "reasoning_content": ""})")),
          chunk(json::parse(R"({"content": null, "reasoning_content": "Think"})")),
          chunk(json::parse(R"({"content": null, "reasoning_content": " more"})")),
          chunk(json::parse(R"({"content": "Hi", "reasoning_content": null})")),
          chunk(json::parse(R"({"tool_calls": [{"index": 0, "id": "call_chatcmpl-7_0", "type": "function",
                                          "function": {"name": "get", "arguments": "{\"q\": \"x"}}]})")),
          chunk(json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "\"}"}}]})")),
          chunk(json::parse(R"({"content": ""})"), "tool_calls", kUsage),
          json("[DONE]"),
      });
}

TEST(ChatCompletionsStream, WithoutThinkingOrIncludeUsage) {
  ChatCompletionsStream s(meta(), ChatResponseOptions{});
  StreamEvents events = s.begin();
  events = concat(events, s.on_deltas({{OutputDeltaKind::content, "Hello", -1}}));
  events = concat(events, s.finish(OutputFinishReason::stop_sequence, usage()));
  std::vector<json> want = {chunk(json::parse(R"({"role": "assistant", "content": ""})")),
                            chunk(json::parse(R"({"content": "Hello"})")),
                            chunk(json::parse(R"({"content": ""})"), "stop", kUsage), json("[DONE]")};
  // Without include_usage only the last chunk has a usage field.
  want[0].erase("usage");
  want[1].erase("usage");
  expect_frames(sse_data_frames(events), want);
}

TEST(ChatCompletion, BodyGolden) {
  CollectedOutput out;
  out.add({{OutputDeltaKind::reasoning, "Think", -1},
           {OutputDeltaKind::content, "Hi", -1},
           {OutputDeltaKind::tool_call_start, "get", 0},
           {OutputDeltaKind::tool_call_arguments, R"({"q": "x"})", 0}});
  const json body = json::parse(dump_json(chat_completion_body(
      meta(), ChatResponseOptions{.thinking = true}, out, OutputFinishReason::tool_calls, usage())));
  json want = json::parse(R"({
    "id": "chatcmpl-7", "object": "chat.completion", "created": 1700000000, "model": "deepseek-v4-flash",
    "system_fingerprint": "fp_t",
    "choices": [{"index": 0,
                 "message": {"role": "assistant", "content": "Hi", "reasoning_content": "Think",
                             "tool_calls": [{"id": "call_chatcmpl-7_0", "type": "function",
                                             "function": {"name": "get", "arguments": "{\"q\": \"x\"}"}}]},
                 "logprobs": null, "finish_reason": "tool_calls"}]})");
  want["usage"] = kUsage;
  EXPECT_EQ(body, want);
}

// Without thinking mode a model that opens <think> itself (V3 encoding: the demo model's worked
// solutions) still gets its reasoning back, as the stream sends it; a reply without reasoning has no
// reasoning_content key (DeepSeek's non-thinking body).
TEST(ChatCompletion, ReasoningWithoutThinkingModeIsReturnedAndAbsentOtherwise) {
  CollectedOutput thought;
  thought.add({{OutputDeltaKind::reasoning, "3 - 1 = 2", -1}, {OutputDeltaKind::content, "2", -1}});
  const json a = json::parse(dump_json(
      chat_completion_body(meta(), ChatResponseOptions{}, thought, OutputFinishReason::stop, usage())));
  EXPECT_EQ(a["choices"][0]["message"]["reasoning_content"], "3 - 1 = 2");
  EXPECT_EQ(a["choices"][0]["message"]["content"], "2");
  CollectedOutput plain;
  plain.add({{OutputDeltaKind::content, "Hello", -1}});
  const json b = json::parse(dump_json(
      chat_completion_body(meta(), ChatResponseOptions{}, plain, OutputFinishReason::stop, usage())));
  EXPECT_FALSE(b["choices"][0]["message"].contains("reasoning_content"));
}

// n > 1: each choice's chunks carry its index, its tool call ids are its own, its closing chunk
// has no usage; the stream ends with one choices-less usage chunk; bodies merge in order.
TEST(ChatCompletionsStream, SeveralChoicesInOneStreamAndOneBody) {
  ChatCompletionsStream s(meta(), ChatResponseOptions{.choice_index = 2});
  StreamEvents events = s.begin();
  events = concat(events, s.on_deltas({{OutputDeltaKind::tool_call_start, "get", 0},
                                       {OutputDeltaKind::tool_call_arguments, "{}", 0}}));
  events = concat(events, s.finish_choice(OutputFinishReason::tool_calls));
  events = concat(events, openai_stream_end(meta(), "chat.completion.chunk", usage()));
  std::vector<json> want = {
      chunk(json::parse(R"({"role": "assistant", "content": ""})")),
      chunk(json::parse(R"({"tool_calls": [{"index": 0, "id": "call_chatcmpl-7_c2_0", "type": "function",
                                          "function": {"name": "get", "arguments": "{}"}}]})")),
      chunk(json::parse(R"({"content": ""})"), "tool_calls"), chunk(json::object()), json("[DONE]")};
  for (int i = 0; i < 3; ++i) {
    want[i].erase("usage");
    want[i]["choices"][0]["index"] = 2;
  }
  want[3]["choices"] = json::array();
  want[3]["usage"] = kUsage;
  expect_frames(sse_data_frames(events), want);

  std::vector<Json> bodies;
  for (int32_t c = 0; c < 2; ++c) {
    CollectedOutput out;
    out.add({{OutputDeltaKind::content, c == 0 ? "a" : "b", -1}});
    bodies.push_back(chat_completion_body(meta(), ChatResponseOptions{.choice_index = c}, out,
                                          OutputFinishReason::stop, ResponseUsage{}));
  }
  const json merged = json::parse(dump_json(openai_merge_choices(std::move(bodies), usage())));
  ASSERT_EQ(merged["choices"].size(), 2u);
  EXPECT_EQ(merged["choices"][0]["index"], 0);
  EXPECT_EQ(merged["choices"][1]["index"], 1);
  EXPECT_EQ(merged["choices"][1]["message"]["content"], "b");
  EXPECT_EQ(merged["usage"], kUsage);
}

TEST(ChatCompletion, FinishReasonNames) {
  EXPECT_STREQ(chat_finish_reason_name(OutputFinishReason::stop), "stop");
  EXPECT_STREQ(chat_finish_reason_name(OutputFinishReason::stop_sequence), "stop");
  EXPECT_STREQ(chat_finish_reason_name(OutputFinishReason::length), "length");
  EXPECT_STREQ(chat_finish_reason_name(OutputFinishReason::content_filter), "content_filter");
  EXPECT_STREQ(chat_finish_reason_name(OutputFinishReason::end_of_stream), "insufficient_system_resource");
}

TEST(Usage, CacheMissIsFlooredAtZero) {
  ResponseUsage u;
  u.prompt_tokens = 3;
  u.prompt_cache_hit_tokens = 5;  // a cache that reports more hits than prompt tokens
  const json j = json::parse(dump_json(openai_usage_json(u)));
  EXPECT_EQ(j["prompt_cache_miss_tokens"], 0);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 5);
}

std::vector<TokenLogprobInfo> two_tokens() {
  // "é" split over two tokens: each token alone is not valid UTF-8.
  return {TokenLogprobInfo{7, "\xC3", -0.25f, {TopLogprob{7, "\xC3", -0.25f}, TopLogprob{8, "e", -1.5f}}},
          TokenLogprobInfo{9, "\xA9!", -0.5f, {}}};
}

TEST(Logprobs, OpenAiContentShape) {
  const json got = json::parse(dump_json(openai_logprobs_content(two_tokens())));
  const json want = json::parse(R"([
    {"token": "\ufffd", "logprob": -0.25, "bytes": [195],
     "top_logprobs": [{"token": "\ufffd", "logprob": -0.25, "bytes": [195]},
                      {"token": "e", "logprob": -1.5, "bytes": [101]}]},
    {"token": "\ufffd!", "logprob": -0.5, "bytes": [169, 33], "top_logprobs": []}])");
  EXPECT_EQ(got, want);
}

TEST(Logprobs, BytesComeFromTheTokenizer) {
  Result<Tokenizer> tok = Tokenizer::from_json(ds::testing::tiny_tokenizer_json(), "", "tiny");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const int32_t a = ds::testing::tiny_byte_id('a');
  const int32_t b = ds::testing::tiny_byte_id(0xC3);
  Result<TokenLogprobInfo> info = token_logprob_info(*tok, IdLogprob{a, -0.1f}, {{a, -0.1f}, {b, -2.0f}});
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->bytes, "a");
  ASSERT_EQ(info->top.size(), 2u);
  EXPECT_EQ(info->top[1].bytes, "\xC3");
  EXPECT_EQ(info->top[1].logprob, -2.0f);
  EXPECT_FALSE(token_logprob_info(*tok, IdLogprob{1 << 30, 0.0f}, {}).ok());
}

TEST(Logprobs, StreamCarriesThemOnTheNextChunkAndLosesNone) {
  ChatCompletionsStream s(meta(), ChatResponseOptions{.logprobs = true});
  const std::vector<TokenLogprobInfo> lp = two_tokens();
  // Step 1 emits no delta (a held-back marker prefix): its logprob waits for step 2's chunk.
  StreamEvents events = s.on_deltas({}, {lp[0]});
  EXPECT_TRUE(events.empty());
  events = s.on_deltas({{OutputDeltaKind::content, "é!", -1}}, {lp[1]});
  const std::vector<json> frames = sse_data_frames(events);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0]["choices"][0]["logprobs"]["content"],
            json::parse(dump_json(openai_logprobs_content(lp))));
  const std::vector<json> last = sse_data_frames(s.finish(OutputFinishReason::stop, usage()));
  EXPECT_EQ(last[0]["choices"][0]["logprobs"], nullptr);
  CollectedOutput out;
  out.content = "é!";
  const json body = json::parse(dump_json(chat_completion_body(meta(), ChatResponseOptions{.logprobs = true},
                                                               out, OutputFinishReason::stop, usage(), lp)));
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"], frames[0]["choices"][0]["logprobs"]["content"]);
}

// The parser feeding the stream builder, token by token, and a client rebuilding the message
// from the chunks: it must equal the non-stream body built from the same output.
TEST(ChatCompletionsStream, ClientRebuildOfTheStreamEqualsTheBody) {
  const std::string output =
      "\nThe user wants the time.\n</think>\n\nLet me check.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke "
      "name=\"clock\">\n"
      "<｜DSML｜ parameter name=\"tz\" string=\"true\">Europe/Paris</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"fmt\" string=\"false\">{\"h24\": true}</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  OutputParserOptions po;
  po.start = OutputStart::reasoning;
  OutputParser parser(po);
  const ChatResponseOptions options{.thinking = true};
  ChatCompletionsStream stream(meta(), options);
  CollectedOutput collected;
  StreamEvents events = stream.begin();
  for (size_t i = 0; i < output.size(); i += 3) {  // 3-byte pieces cut through markers and characters
    const std::vector<OutputDelta> deltas = parser.feed(output.substr(i, 3), 1);
    collected.add(deltas);
    events = concat(events, stream.on_deltas(deltas));
  }
  const std::vector<OutputDelta> tail = parser.finish();
  collected.add(tail);
  events = concat(events, stream.on_deltas(tail));
  ResponseUsage u = usage();
  u.completion_tokens = parser.completion_tokens();
  u.reasoning_tokens = parser.reasoning_tokens();
  const OutputFinishReason reason = parser.finish_reason(GenerationEnd::stop);
  events = concat(events, stream.finish(reason, u));

  json message = {{"role", "assistant"}, {"content", ""}, {"reasoning_content", ""}};
  json calls = json::array();
  json finish_reason, final_usage;
  for (const json& frame : sse_data_frames(events)) {
    if (frame == json("[DONE]")) continue;
    const json& choice = frame["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string())
      message["content"] = message["content"].get<std::string>() + delta["content"].get<std::string>();
    if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string())
      message["reasoning_content"] =
          message["reasoning_content"].get<std::string>() + delta["reasoning_content"].get<std::string>();
    for (const json& call : delta.value("tool_calls", json::array())) {
      const size_t index = call["index"].get<size_t>();
      if (index == calls.size())
        calls.push_back({{"id", call["id"]},
                         {"type", call["type"]},
                         {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}});
      calls[index]["function"]["arguments"] = calls[index]["function"]["arguments"].get<std::string>() +
                                              call["function"]["arguments"].get<std::string>();
    }
    if (!choice["finish_reason"].is_null()) {
      finish_reason = choice["finish_reason"];
      final_usage = frame["usage"];
    }
  }
  message["tool_calls"] = calls;
  const json body = json::parse(dump_json(chat_completion_body(meta(), options, collected, reason, u)));
  EXPECT_EQ(message, body["choices"][0]["message"]);
  EXPECT_EQ(finish_reason, "tool_calls");
  EXPECT_EQ(final_usage, body["usage"]);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "The user wants the time.");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Let me check.");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"tz": "Europe/Paris", "fmt": {"h24": true}})"));
  EXPECT_GT(u.reasoning_tokens, 0);
  EXPECT_LT(u.reasoning_tokens, u.completion_tokens);
}

ResponseMeta cmpl_meta() { return ResponseMeta{"cmpl-3", "deepseek-v3", 1700000001, ""}; }

TEST(CompletionsStream, Golden) {
  CompletionsStream s(cmpl_meta(), CompletionsResponseOptions{.include_usage = true, .logprobs = true});
  const std::vector<TokenLogprobInfo> lp = two_tokens();
  StreamEvents events = s.on_deltas({{OutputDeltaKind::content, "é!", -1}}, lp);
  events = concat(events, s.finish(OutputFinishReason::length, usage()));
  const json base = json::parse(R"({"id": "cmpl-3", "object": "text_completion", "created": 1700000001,
                                   "model": "deepseek-v3", "system_fingerprint": null})");
  json first = base;
  first["choices"] = json::parse(R"([{"text": "é!", "index": 0, "finish_reason": null,
      "logprobs": {"tokens": ["\ufffd", "\ufffd!"], "token_logprobs": [-0.25, -0.5],
                   "top_logprobs": [{"\ufffd": -0.25, "e": -1.5}, {}], "text_offset": [0, 1]}}])");
  first["usage"] = nullptr;
  json last = base;
  last["choices"] = json::parse(R"([{"text": "", "index": 0, "logprobs": null, "finish_reason": "length"}])");
  last["usage"] = kUsage;
  expect_frames(sse_data_frames(events), {first, last, json("[DONE]")});
}

TEST(Completion, TextOffsetsStartAfterAnEchoedPrompt) {
  const json j = json::parse(dump_json(
      completion_body(cmpl_meta(), CompletionsResponseOptions{.logprobs = true, .text_offset_start = 5}, "x",
                      OutputFinishReason::stop, usage(), two_tokens())));
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], json::parse("[5, 6]"));
}

TEST(Completion, BodyAndParserOptions) {
  CompletionRequest req;
  req.sampling.stop = {"\n\n"};
  const OutputParserOptions o = completions_parser_options(req);
  EXPECT_FALSE(o.drop_leading_newlines);
  EXPECT_EQ(o.tool_markup, ToolCallMarkup::none);
  OutputParser parser(o);
  CollectedOutput out;
  out.add(parser.feed("\nline one\n\nline two", 3));
  out.add(parser.finish());
  EXPECT_EQ(out.content, "\nline one");
  const json body =
      json::parse(dump_json(completion_body(cmpl_meta(), CompletionsResponseOptions{}, out.content,
                                            parser.finish_reason(GenerationEnd::stop), usage())));
  json want = json::parse(R"({"id": "cmpl-3", "object": "text_completion", "created": 1700000001,
      "model": "deepseek-v3", "system_fingerprint": null,
      "choices": [{"text": "\nline one", "index": 0, "logprobs": null, "finish_reason": "stop"}]})");
  want["usage"] = kUsage;
  EXPECT_EQ(body, want);
}

}  // namespace
}  // namespace ds::recipe
