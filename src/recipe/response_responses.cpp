#include "recipe/response_responses.h"

#include <fmt/format.h>

namespace ds::recipe {

Json responses_usage_json(const ResponseUsage& usage) {
  Json j = Json::object();
  j["input_tokens"] = usage.prompt_tokens;
  j["input_tokens_details"] = Json{{"cached_tokens", usage.prompt_cache_hit_tokens}};
  j["output_tokens"] = usage.completion_tokens;
  j["output_tokens_details"] = Json{{"reasoning_tokens", usage.reasoning_tokens}};
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  return j;
}

namespace {

// "incomplete" with its reason, or "completed".
const char* incomplete_reason(OutputFinishReason reason) {
  switch (reason) {
    case OutputFinishReason::length:
      return "max_output_tokens";
    case OutputFinishReason::content_filter:
      return "content_filter";
    default:
      return nullptr;
  }
}

Json reasoning_item(const ResponseMeta& meta, size_t n, const std::string& text, const char* status) {
  Json item = Json::object();
  item["id"] = fmt::format("rs_{}_{}", meta.id, n);
  item["type"] = "reasoning";
  item["summary"] = Json::array();
  item["content"] = text.empty() && std::string_view(status) == "in_progress"
                        ? Json::array()
                        : Json::array({Json{{"type", "reasoning_text"}, {"text", text}}});
  item["status"] = status;
  return item;
}

Json output_text_part(const std::string& text) {
  return Json{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
}

Json message_item(const ResponseMeta& meta, size_t n, const std::string& text, const char* status,
                  const char* phase) {
  Json item = Json::object();
  item["id"] = fmt::format("msg_{}_{}", meta.id, n);
  item["type"] = "message";
  item["role"] = "assistant";
  item["status"] = status;
  item["content"] = phase == nullptr ? Json::array() : Json::array({output_text_part(text)});
  if (phase != nullptr) item["phase"] = phase;
  return item;
}

Json function_call_item(const ResponseMeta& meta, size_t n, int32_t call_index, const std::string& name,
                        const std::string& arguments, const char* status) {
  Json item = Json::object();
  item["id"] = fmt::format("fc_{}_{}", meta.id, n);
  item["type"] = "function_call";
  item["status"] = status;
  item["call_id"] = fmt::format("call_{}_{}", meta.id, call_index);
  const size_t sep = name.find("::");
  if (sep != std::string::npos) {
    item["namespace"] = name.substr(0, sep);
    item["name"] = name.substr(sep + 2);
  } else {
    item["name"] = name;
  }
  item["arguments"] = arguments;
  return item;
}

}  // namespace

StreamEvent ResponsesStream::event(std::string_view type, Json fields) {
  Json j = Json::object();
  j["type"] = type;
  j["sequence_number"] = sequence_number_++;
  for (auto& [key, value] : fields.items()) j[key] = std::move(value);
  return named_event(type, j);
}

Json ResponsesStream::response_object(std::string_view status) const {
  Json r = Json::object();
  r["id"] = meta_.id;
  r["object"] = "response";
  r["created_at"] = meta_.created_unix_s;
  r["status"] = status;
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  r["model"] = meta_.model;
  r["output"] = Json::array();
  for (const Json& item : done_items_) r["output"].push_back(item);
  r["usage"] = nullptr;
  return r;
}

StreamEvents ResponsesStream::begin() {
  StreamEvents events;
  events.push_back(event("response.created", Json{{"response", response_object("in_progress")}}));
  events.push_back(event("response.in_progress", Json{{"response", response_object("in_progress")}}));
  return events;
}

void ResponsesStream::open(Item kind, const OutputDelta& first, StreamEvents& events) {
  const size_t n = done_items_.size();
  open_ = kind;
  open_text_.clear();
  switch (kind) {
    case Item::reasoning:
      open_item_ = reasoning_item(meta_, n, "", "in_progress");
      break;
    case Item::message:
      open_item_ = message_item(meta_, n, "", "in_progress", nullptr);
      break;
    case Item::function_call:
      open_item_ = function_call_item(meta_, n, first.tool_index, first.text, "", "in_progress");
      break;
    case Item::none:
      return;
  }
  events.push_back(event("response.output_item.added", Json{{"output_index", n}, {"item", open_item_}}));
  if (kind == Item::function_call) return;
  const Json part =
      kind == Item::reasoning ? Json{{"type", "reasoning_text"}, {"text", ""}} : output_text_part("");
  events.push_back(
      event("response.content_part.added",
            Json{{"item_id", open_item_["id"]}, {"output_index", n}, {"content_index", 0}, {"part", part}}));
}

void ResponsesStream::close(Item next, StreamEvents& events) {
  if (open_ == Item::none) return;
  const size_t n = done_items_.size();
  const Json id = open_item_["id"];
  Json done;
  switch (open_) {
    case Item::reasoning: {
      events.push_back(
          event("response.reasoning_text.done",
                Json{{"item_id", id}, {"output_index", n}, {"content_index", 0}, {"text", open_text_}}));
      const Json part = Json{{"type", "reasoning_text"}, {"text", open_text_}};
      events.push_back(
          event("response.content_part.done",
                Json{{"item_id", id}, {"output_index", n}, {"content_index", 0}, {"part", part}}));
      done = reasoning_item(meta_, n, open_text_, "completed");
      break;
    }
    case Item::message: {
      events.push_back(
          event("response.output_text.done",
                Json{{"item_id", id}, {"output_index", n}, {"content_index", 0}, {"text", open_text_}}));
      events.push_back(event("response.content_part.done", Json{{"item_id", id},
                                                                {"output_index", n},
                                                                {"content_index", 0},
                                                                {"part", output_text_part(open_text_)}}));
      done = message_item(meta_, n, open_text_, "completed",
                          next == Item::function_call ? "commentary" : "final_answer");
      break;
    }
    case Item::function_call: {
      done = open_item_;
      done["status"] = "completed";
      done["arguments"] = open_text_;
      events.push_back(event(
          "response.function_call_arguments.done",
          Json{{"item_id", id}, {"output_index", n}, {"name", done["name"]}, {"arguments", open_text_}}));
      break;
    }
    case Item::none:
      break;
  }
  events.push_back(event("response.output_item.done", Json{{"output_index", n}, {"item", done}}));
  done_items_.push_back(std::move(done));
  open_ = Item::none;
  open_text_.clear();
}

StreamEvents ResponsesStream::on_deltas(const std::vector<OutputDelta>& deltas) {
  StreamEvents events;
  for (const OutputDelta& d : deltas) {
    switch (d.kind) {
      case OutputDeltaKind::reasoning:
        if (open_ != Item::reasoning) {
          close(Item::reasoning, events);
          open(Item::reasoning, d, events);
        }
        open_text_ += d.text;
        events.push_back(event("response.reasoning_text.delta", Json{{"item_id", open_item_["id"]},
                                                                     {"output_index", done_items_.size()},
                                                                     {"content_index", 0},
                                                                     {"delta", d.text}}));
        break;
      case OutputDeltaKind::content:
        if (open_ != Item::message) {
          close(Item::message, events);
          open(Item::message, d, events);
        }
        open_text_ += d.text;
        events.push_back(event("response.output_text.delta", Json{{"item_id", open_item_["id"]},
                                                                  {"output_index", done_items_.size()},
                                                                  {"content_index", 0},
                                                                  {"delta", d.text},
                                                                  {"logprobs", Json::array()}}));
        break;
      case OutputDeltaKind::tool_call_start:
        close(Item::function_call, events);
        open(Item::function_call, d, events);
        break;
      case OutputDeltaKind::tool_call_arguments:
        if (open_ != Item::function_call) break;  // arguments only follow their own start
        open_text_ += d.text;
        events.push_back(event(
            "response.function_call_arguments.delta",
            Json{{"item_id", open_item_["id"]}, {"output_index", done_items_.size()}, {"delta", d.text}}));
        break;
    }
  }
  return events;
}

StreamEvents ResponsesStream::finish(OutputFinishReason reason, const ResponseUsage& usage) {
  StreamEvents events;
  close(Item::none, events);
  const bool complete = incomplete_reason(reason) == nullptr;
  events.push_back(event(complete ? "response.completed" : "response.incomplete",
                         Json{{"response", final_response(reason, usage)}}));
  return events;
}

Json ResponsesStream::final_response(OutputFinishReason reason, const ResponseUsage& usage) const {
  const char* incomplete = incomplete_reason(reason);
  Json r = response_object(incomplete == nullptr ? "completed" : "incomplete");
  if (incomplete != nullptr) r["incomplete_details"] = Json{{"reason", incomplete}};
  r["usage"] = responses_usage_json(usage);
  return r;
}

Json responses_body(const ResponseMeta& meta, const CollectedOutput& output, OutputFinishReason reason,
                    const ResponseUsage& usage) {
  // The stream builder fed with the whole output gives the same items; reuse it so the two
  // cannot drift apart.
  ResponsesStream stream(meta);
  std::vector<OutputDelta> deltas;
  if (!output.reasoning.empty()) deltas.push_back({OutputDeltaKind::reasoning, output.reasoning, -1});
  if (!output.content.empty()) deltas.push_back({OutputDeltaKind::content, output.content, -1});
  for (size_t i = 0; i < output.tool_calls.size(); ++i) {
    const auto index = static_cast<int32_t>(i);
    deltas.push_back({OutputDeltaKind::tool_call_start, output.tool_calls[i].name, index});
    if (!output.tool_calls[i].arguments.empty())
      deltas.push_back({OutputDeltaKind::tool_call_arguments, output.tool_calls[i].arguments, index});
  }
  (void)stream.on_deltas(deltas);
  (void)stream.finish(reason, usage);
  return stream.final_response(reason, usage);
}

}  // namespace ds::recipe
