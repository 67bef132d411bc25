// OpenAI Responses builder against event sequences written by hand from features spec §10.7 and
// OpenAI's documented Responses stream events.
#include "recipe/response_responses.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipe/response_test_util.h"

namespace ds::recipe {
namespace {

using nlohmann::json;
using testing::concat;
using testing::expect_frames;
using testing::sse_typed_frames;

ResponseMeta meta() { return ResponseMeta{"resp_5", "deepseek-v4-flash", 1700000002, ""}; }

ResponseUsage usage() {
  ResponseUsage u;
  u.prompt_tokens = 10;
  u.prompt_cache_hit_tokens = 4;
  u.completion_tokens = 7;
  u.reasoning_tokens = 3;
  return u;
}

const json kUsage = json::parse(R"({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 17})");

json response(const std::string& status, const json& output, const json& usage_field,
              const json& incomplete = nullptr) {
  return json{{"id", "resp_5"},
              {"object", "response"},
              {"created_at", 1700000002},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", incomplete},
              {"model", "deepseek-v4-flash"},
              {"output", output},
              {"usage", usage_field}};
}

// Adds sequence numbers 0, 1, ... in order.
std::vector<json> numbered(std::vector<json> frames) {
  for (size_t i = 0; i < frames.size(); ++i) frames[i]["sequence_number"] = i;
  return frames;
}

TEST(ResponsesStream, ReasoningMessageFunctionCallGolden) {
  ResponsesStream s(meta());
  StreamEvents events = s.begin();
  events = concat(events, s.on_deltas({{OutputDeltaKind::reasoning, "Hmm", -1}}));
  events = concat(events, s.on_deltas({{OutputDeltaKind::content, "Checking.", -1},
                                       {OutputDeltaKind::tool_call_start, "web::search", 0},
                                       {OutputDeltaKind::tool_call_arguments, R"({"q": 1})", 0}}));
  events = concat(events, s.finish(OutputFinishReason::tool_calls, usage()));

  const json rs_done = json::parse(R"({"id": "rs_resp_5_0", "type": "reasoning", "summary": [],
      "content": [{"type": "reasoning_text", "text": "Hmm"}], "status": "completed"})");
  const json msg_done = json::parse(R"({"id": "msg_resp_5_1", "type": "message", "role": "assistant",
      "status": "completed", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
      "phase": "commentary"})");
  const json fc_added = json::parse(R"({"id": "fc_resp_5_2", "type": "function_call", "status": "in_progress",
      "call_id": "call_resp_5_0", "namespace": "web", "name": "search", "arguments": ""})");
  json fc_done = fc_added;
  fc_done["status"] = "completed";
  fc_done["arguments"] = R"({"q": 1})";
  const json empty = json::array();
  expect_frames(
      sse_typed_frames(events),
      numbered({
          json{{"type", "response.created"}, {"response", response("in_progress", empty, nullptr)}},
          json{{"type", "response.in_progress"}, {"response", response("in_progress", empty, nullptr)}},
          json::parse(R"({"type": "response.output_item.added", "output_index": 0,
              "item": {"id": "rs_resp_5_0", "type": "reasoning", "summary": [], "content": [], "status": "in_progress"}})"),
          json::parse(R"({"type": "response.content_part.added", "item_id": "rs_resp_5_0", "output_index": 0,
              "content_index": 0, "part": {"type": "reasoning_text", "text": ""}})"),
          json::parse(
              R"({"type": "response.reasoning_text.delta", "item_id": "rs_resp_5_0", "output_index": 0,
              "content_index": 0, "delta": "Hmm"})"),
          json::parse(R"({"type": "response.reasoning_text.done", "item_id": "rs_resp_5_0", "output_index": 0,
              "content_index": 0, "text": "Hmm"})"),
          json::parse(R"({"type": "response.content_part.done", "item_id": "rs_resp_5_0", "output_index": 0,
              "content_index": 0, "part": {"type": "reasoning_text", "text": "Hmm"}})"),
          json{{"type", "response.output_item.done"}, {"output_index", 0}, {"item", rs_done}},
          json::parse(R"({"type": "response.output_item.added", "output_index": 1,
              "item": {"id": "msg_resp_5_1", "type": "message", "role": "assistant", "status": "in_progress",
                       "content": []}})"),
          json::parse(R"({"type": "response.content_part.added", "item_id": "msg_resp_5_1", "output_index": 1,
              "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})"),
          json::parse(R"({"type": "response.output_text.delta", "item_id": "msg_resp_5_1", "output_index": 1,
              "content_index": 0, "delta": "Checking.", "logprobs": []})"),
          json::parse(R"({"type": "response.output_text.done", "item_id": "msg_resp_5_1", "output_index": 1,
              "content_index": 0, "text": "Checking."})"),
          json::parse(R"({"type": "response.content_part.done", "item_id": "msg_resp_5_1", "output_index": 1,
              "content_index": 0, "part": {"type": "output_text", "text": "Checking.", "annotations": []}})"),
          json{{"type", "response.output_item.done"}, {"output_index", 1}, {"item", msg_done}},
          json{{"type", "response.output_item.added"}, {"output_index", 2}, {"item", fc_added}},
          json::parse(R"({"type": "response.function_call_arguments.delta", "item_id": "fc_resp_5_2",
              "output_index": 2, "delta": "{\"q\": 1}"})"),
          json::parse(R"({"type": "response.function_call_arguments.done", "item_id": "fc_resp_5_2",
              "output_index": 2, "name": "search", "arguments": "{\"q\": 1}"})"),
          json{{"type", "response.output_item.done"}, {"output_index", 2}, {"item", fc_done}},
          json{{"type", "response.completed"},
               {"response", response("completed", json::array({rs_done, msg_done, fc_done}), kUsage)}},
      }));
}

TEST(ResponsesStream, LengthEndsIncompleteAndAFinalMessageIsFinalAnswer) {
  ResponsesStream s(meta());
  StreamEvents events = s.begin();
  events = concat(events, s.on_deltas({{OutputDeltaKind::content, "Part", -1}}));
  events = concat(events, s.finish(OutputFinishReason::length, usage()));
  const std::vector<json> frames = sse_typed_frames(events);
  ASSERT_FALSE(frames.empty());
  const json& last = frames.back();
  EXPECT_EQ(last["type"], "response.incomplete");
  EXPECT_EQ(last["response"]["status"], "incomplete");
  EXPECT_EQ(last["response"]["incomplete_details"], json::parse(R"({"reason": "max_output_tokens"})"));
  EXPECT_EQ(last["response"]["output"][0]["phase"], "final_answer");
  for (size_t i = 0; i < frames.size(); ++i) EXPECT_EQ(frames[i]["sequence_number"], i);
}

TEST(Responses, BodyMatchesTheStreamsFinalResponse) {
  CollectedOutput out;
  out.add({{OutputDeltaKind::reasoning, "Hmm", -1},
           {OutputDeltaKind::content, "Checking.", -1},
           {OutputDeltaKind::tool_call_start, "web::search", 0},
           {OutputDeltaKind::tool_call_arguments, R"({"q": 1})", 0}});
  const json body =
      json::parse(dump_json(responses_body(meta(), out, OutputFinishReason::tool_calls, usage())));
  EXPECT_EQ(body["status"], "completed");
  ASSERT_EQ(body["output"].size(), 3u);
  EXPECT_EQ(body["output"][0]["content"][0]["text"], "Hmm");
  EXPECT_EQ(body["output"][1]["phase"], "commentary");
  EXPECT_EQ(body["output"][2]["call_id"], "call_resp_5_0");
  EXPECT_EQ(body["output"][2]["arguments"], R"({"q": 1})");
  EXPECT_EQ(body["usage"], kUsage);
}

}  // namespace
}  // namespace ds::recipe
