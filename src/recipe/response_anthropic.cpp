#include "recipe/response_anthropic.h"

#include <fmt/format.h>

#include <algorithm>

namespace ds::recipe {

const char* anthropic_stop_reason_name(OutputFinishReason reason) {
  switch (reason) {
    case OutputFinishReason::stop:
    case OutputFinishReason::end_of_stream:
      return "end_turn";
    case OutputFinishReason::length:
      return "max_tokens";
    case OutputFinishReason::tool_calls:
      return "tool_use";
    case OutputFinishReason::stop_sequence:
      return "stop_sequence";
    case OutputFinishReason::content_filter:
      return "refusal";
  }
  return "end_turn";
}

Json anthropic_usage_json(const ResponseUsage& usage) {
  Json j = Json::object();
  // Anthropic's split: input + cache_creation + cache_read = the whole prompt.
  const int64_t creation = std::min(usage.cache_creation_tokens, usage.prompt_cache_miss_tokens());
  j["input_tokens"] = usage.prompt_cache_miss_tokens() - creation;
  j["cache_creation_input_tokens"] = creation;
  j["cache_read_input_tokens"] = usage.prompt_cache_hit_tokens;
  j["output_tokens"] = usage.completion_tokens;
  j["service_tier"] = "standard";
  return j;
}

std::string anthropic_tool_use_id(const ResponseMeta& meta, int32_t index) {
  return fmt::format("toolu_{}_{}", meta.id, index);
}

namespace {

Json stop_sequence_json(OutputFinishReason reason, const std::string& stop_sequence) {
  return reason == OutputFinishReason::stop_sequence ? Json(stop_sequence) : Json(nullptr);
}

}  // namespace

StreamEvents AnthropicMessagesStream::begin(const ResponseUsage& prompt_usage) {
  ResponseUsage usage = prompt_usage;
  usage.completion_tokens = 0;
  Json message = Json::object();
  message["id"] = meta_.id;
  message["type"] = "message";
  message["role"] = "assistant";
  message["model"] = meta_.model;
  message["content"] = Json::array();
  message["stop_reason"] = nullptr;
  message["stop_sequence"] = nullptr;
  message["usage"] = anthropic_usage_json(usage);
  return {named_event("message_start", Json{{"type", "message_start"}, {"message", std::move(message)}})};
}

void AnthropicMessagesStream::open(Block kind, Json content_block, StreamEvents& events) {
  close(events);
  open_ = kind;
  const int32_t index = n_blocks_++;
  events.push_back(named_event(
      "content_block_start",
      Json{{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(content_block)}}));
  if (index == 0) events.push_back(named_event("ping", Json{{"type", "ping"}}));
}

void AnthropicMessagesStream::close(StreamEvents& events) {
  if (open_ == Block::none) return;
  // Clients echo thinking blocks back with their signature; the response id stands in for one.
  if (open_ == Block::thinking) delta(Json{{"type", "signature_delta"}, {"signature", meta_.id}}, events);
  events.push_back(
      named_event("content_block_stop", Json{{"type", "content_block_stop"}, {"index", n_blocks_ - 1}}));
  open_ = Block::none;
  open_tool_index_ = -1;
}

void AnthropicMessagesStream::delta(Json delta, StreamEvents& events) const {
  events.push_back(named_event(
      "content_block_delta",
      Json{{"type", "content_block_delta"}, {"index", n_blocks_ - 1}, {"delta", std::move(delta)}}));
}

StreamEvents AnthropicMessagesStream::on_deltas(const std::vector<OutputDelta>& deltas) {
  StreamEvents events;
  for (const OutputDelta& d : deltas) {
    switch (d.kind) {
      case OutputDeltaKind::reasoning:
        if (open_ != Block::thinking)
          open(Block::thinking, Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, events);
        delta(Json{{"type", "thinking_delta"}, {"thinking", d.text}}, events);
        break;
      case OutputDeltaKind::content:
        if (open_ != Block::text) open(Block::text, Json{{"type", "text"}, {"text", ""}}, events);
        delta(Json{{"type", "text_delta"}, {"text", d.text}}, events);
        break;
      case OutputDeltaKind::tool_call_start:
        open(Block::tool_use,
             Json{{"type", "tool_use"},
                  {"id", anthropic_tool_use_id(meta_, d.tool_index)},
                  {"name", d.text},
                  {"input", Json::object()}},
             events);
        open_tool_index_ = d.tool_index;
        break;
      case OutputDeltaKind::tool_call_arguments:
        // Arguments only ever follow their own start; anything else would be a parser bug.
        if (open_ == Block::tool_use && open_tool_index_ == d.tool_index)
          delta(Json{{"type", "input_json_delta"}, {"partial_json", d.text}}, events);
        break;
    }
  }
  return events;
}

StreamEvents AnthropicMessagesStream::finish(OutputFinishReason reason, const std::string& stop_sequence,
                                             const ResponseUsage& usage) {
  StreamEvents events;
  close(events);
  events.push_back(named_event(
      "message_delta", Json{{"type", "message_delta"},
                            {"delta", Json{{"stop_reason", anthropic_stop_reason_name(reason)},
                                           {"stop_sequence", stop_sequence_json(reason, stop_sequence)}}},
                            {"usage", anthropic_usage_json(usage)}}));
  events.push_back(named_event("message_stop", Json{{"type", "message_stop"}}));
  return events;
}

Json anthropic_message_body(const ResponseMeta& meta, const CollectedOutput& output,
                            OutputFinishReason reason, const std::string& stop_sequence,
                            const ResponseUsage& usage) {
  Json content = Json::array();
  if (!output.reasoning.empty())
    content.push_back(Json{{"type", "thinking"}, {"thinking", output.reasoning}, {"signature", meta.id}});
  if (!output.content.empty()) content.push_back(Json{{"type", "text"}, {"text", output.content}});
  for (size_t i = 0; i < output.tool_calls.size(); ++i) {
    const CollectedToolCall& c = output.tool_calls[i];
    Json input = Json::parse(c.arguments, nullptr, false);
    if (input.is_discarded() || !input.is_object()) input = Json::object();
    content.push_back(Json{{"type", "tool_use"},
                           {"id", anthropic_tool_use_id(meta, static_cast<int32_t>(i))},
                           {"name", c.name},
                           {"input", std::move(input)}});
  }
  Json j = Json::object();
  j["id"] = meta.id;
  j["type"] = "message";
  j["role"] = "assistant";
  j["model"] = meta.model;
  j["content"] = std::move(content);
  j["stop_reason"] = anthropic_stop_reason_name(reason);
  j["stop_sequence"] = stop_sequence_json(reason, stop_sequence);
  j["usage"] = anthropic_usage_json(usage);
  return j;
}

}  // namespace ds::recipe
