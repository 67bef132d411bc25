// Anthropic Messages builder against event sequences written by hand from features spec §10.6 and
// Anthropic's documented stream (message_start, content blocks with ping after the first,
// signature_delta closing thinking, message_delta with stop_reason and usage, message_stop).
#include "recipe/response_anthropic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipe/response_test_util.h"

namespace ds::recipe {
namespace {

using nlohmann::json;
using testing::concat;
using testing::expect_frames;
using testing::sse_typed_frames;

ResponseMeta meta() { return ResponseMeta{"msg_9", "deepseek-v4-flash", 0, ""}; }

ResponseUsage usage() {
  ResponseUsage u;
  u.prompt_tokens = 10;
  u.prompt_cache_hit_tokens = 4;
  u.completion_tokens = 7;
  u.reasoning_tokens = 3;
  return u;
}

TEST(AnthropicMessagesStream, ThinkingTextToolUseGolden) {
  AnthropicMessagesStream s(meta());
  StreamEvents events = s.begin(usage());
  events = concat(events, s.on_deltas({{OutputDeltaKind::reasoning, "Hmm", -1}}));
  events = concat(events, s.on_deltas({{OutputDeltaKind::content, "Let me look.", -1},
                                       {OutputDeltaKind::tool_call_start, "search", 0},
                                       {OutputDeltaKind::tool_call_arguments, R"({"q": )", 0}}));
  events = concat(events, s.on_deltas({{OutputDeltaKind::tool_call_arguments, R"(1})", 0}}));
  events = concat(events, s.finish(OutputFinishReason::tool_calls, "", usage()));
  const json start_usage = json::parse(R"({"input_tokens": 6, "cache_creation_input_tokens": 0,
      "cache_read_input_tokens": 4, "output_tokens": 0, "service_tier": "standard"})");
  json final_usage = start_usage;
  final_usage["output_tokens"] = 7;
  expect_frames(
      sse_typed_frames(events),
      {
          json{{"type", "message_start"},
               {"message",
                {{"id", "msg_9"},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", "deepseek-v4-flash"},
                 {"content", json::array()},
                 {"stop_reason", nullptr},
                 {"stop_sequence", nullptr},
                 {"usage", start_usage}}}},
          json::parse(R"({"type": "content_block_start", "index": 0,
                          "content_block": {"type": "thinking", "thinking": "", "signature": ""}})"),
          json::parse(R"({"type": "ping"})"),
          json::parse(R"({"type": "content_block_delta", "index": 0,
                          "delta": {"type": "thinking_delta", "thinking": "Hmm"}})"),
          json::parse(R"({"type": "content_block_delta", "index": 0,
                          "delta": {"type": "signature_delta", "signature": "msg_9"}})"),
          json::parse(R"({"type": "content_block_stop", "index": 0})"),
          json::parse(
              R"({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})"),
          json::parse(R"({"type": "content_block_delta", "index": 1,
                          "delta": {"type": "text_delta", "text": "Let me look."}})"),
          json::parse(R"({"type": "content_block_stop", "index": 1})"),
          json::parse(R"({"type": "content_block_start", "index": 2,
                          "content_block": {"type": "tool_use", "id": "toolu_msg_9_0", "name": "search", "input": {}}})"),
          json::parse(R"({"type": "content_block_delta", "index": 2,
                          "delta": {"type": "input_json_delta", "partial_json": "{\"q\": "}})"),
          json::parse(R"({"type": "content_block_delta", "index": 2,
                          "delta": {"type": "input_json_delta", "partial_json": "1}"}})"),
          json::parse(R"({"type": "content_block_stop", "index": 2})"),
          json{{"type", "message_delta"},
               {"delta", {{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}}},
               {"usage", final_usage}},
          json::parse(R"({"type": "message_stop"})"),
      });
}

TEST(AnthropicMessagesStream, StopSequenceAndPingAfterAFirstTextBlock) {
  AnthropicMessagesStream s(meta());
  StreamEvents events = s.on_deltas({{OutputDeltaKind::content, "a", -1}});
  events = concat(events, s.on_deltas({{OutputDeltaKind::content, "b", -1}}));
  events = concat(events, s.finish(OutputFinishReason::stop_sequence, "###", usage()));
  const std::vector<json> frames = sse_typed_frames(events);
  ASSERT_EQ(frames.size(), 7u);
  EXPECT_EQ(frames[1], json::parse(R"({"type": "ping"})"));
  EXPECT_EQ(frames[3]["index"], 0);  // one text block across both steps
  EXPECT_EQ(frames[3]["delta"]["text"], "b");
  EXPECT_EQ(frames[5]["delta"], json::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "###"})"));
}

TEST(AnthropicMessage, BodyGolden) {
  CollectedOutput out;
  out.add({{OutputDeltaKind::reasoning, "Hmm", -1},
           {OutputDeltaKind::content, "Let me look.", -1},
           {OutputDeltaKind::tool_call_start, "search", 0},
           {OutputDeltaKind::tool_call_arguments, R"({"q": 1})", 0},
           {OutputDeltaKind::tool_call_start, "broken", 1},
           {OutputDeltaKind::tool_call_arguments, R"({"q": )", 1}});
  const json body = json::parse(
      dump_json(anthropic_message_body(meta(), out, OutputFinishReason::tool_calls, "", usage())));
  const json want = json::parse(R"({
    "id": "msg_9", "type": "message", "role": "assistant", "model": "deepseek-v4-flash",
    "content": [{"type": "thinking", "thinking": "Hmm", "signature": "msg_9"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_msg_9_0", "name": "search", "input": {"q": 1}},
                {"type": "tool_use", "id": "toolu_msg_9_1", "name": "broken", "input": {}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 6, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4,
              "output_tokens": 7, "service_tier": "standard"}})");
  EXPECT_EQ(body, want);
}

TEST(AnthropicMessage, StopReasonNames) {
  EXPECT_STREQ(anthropic_stop_reason_name(OutputFinishReason::stop), "end_turn");
  EXPECT_STREQ(anthropic_stop_reason_name(OutputFinishReason::length), "max_tokens");
  EXPECT_STREQ(anthropic_stop_reason_name(OutputFinishReason::tool_calls), "tool_use");
  EXPECT_STREQ(anthropic_stop_reason_name(OutputFinishReason::stop_sequence), "stop_sequence");
  EXPECT_STREQ(anthropic_stop_reason_name(OutputFinishReason::content_filter), "refusal");
}

}  // namespace
}  // namespace ds::recipe
