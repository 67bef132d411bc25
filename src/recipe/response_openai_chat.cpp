#include "recipe/response_openai_chat.h"

#include <fmt/format.h>

namespace ds::recipe {

const char* chat_finish_reason_name(OutputFinishReason reason) {
  switch (reason) {
    case OutputFinishReason::stop:
    case OutputFinishReason::stop_sequence:
      return "stop";
    case OutputFinishReason::length:
      return "length";
    case OutputFinishReason::tool_calls:
      return "tool_calls";
    case OutputFinishReason::content_filter:
      return "content_filter";
    case OutputFinishReason::end_of_stream:
      return "insufficient_system_resource";
  }
  return "stop";
}

std::string chat_tool_call_id(const ResponseMeta& meta, int32_t index, int32_t choice_index) {
  if (choice_index == 0) return fmt::format("call_{}_{}", meta.id, index);
  return fmt::format("call_{}_c{}_{}", meta.id, choice_index, index);
}

Json ChatCompletionsStream::chunk(Json delta) {
  Json choice = Json::object();
  choice["index"] = options_.choice_index;
  choice["delta"] = std::move(delta);
  if (options_.logprobs && !pending_logprobs_.empty()) {
    choice["logprobs"] = Json{{"content", openai_logprobs_content(pending_logprobs_)}};
    pending_logprobs_.clear();
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = nullptr;
  return openai_envelope(meta_, "chat.completion.chunk", std::move(choice),
                         options_.include_usage ? Json(nullptr) : Json(Json::value_t::discarded));
}

StreamEvents ChatCompletionsStream::begin() {
  Json delta = Json::object();
  delta["role"] = "assistant";
  if (options_.thinking) {
    delta["content"] = nullptr;
    delta["reasoning_content"] = "";
  } else {
    delta["content"] = "";
  }
  return {data_event(chunk(std::move(delta)))};
}

StreamEvents ChatCompletionsStream::on_deltas(const std::vector<OutputDelta>& deltas,
                                              const std::vector<TokenLogprobInfo>& logprobs) {
  if (options_.logprobs) pending_logprobs_.insert(pending_logprobs_.end(), logprobs.begin(), logprobs.end());
  StreamEvents events;
  for (size_t i = 0; i < deltas.size(); ++i) {
    const OutputDelta& d = deltas[i];
    Json delta = Json::object();
    switch (d.kind) {
      case OutputDeltaKind::reasoning:
        delta["content"] = nullptr;
        delta["reasoning_content"] = d.text;
        break;
      case OutputDeltaKind::content:
        delta["content"] = d.text;
        if (options_.thinking) delta["reasoning_content"] = nullptr;
        break;
      case OutputDeltaKind::tool_call_start: {
        // The start carries the arguments already known in this step.
        std::string arguments;
        while (i + 1 < deltas.size() && deltas[i + 1].kind == OutputDeltaKind::tool_call_arguments &&
               deltas[i + 1].tool_index == d.tool_index) {
          arguments += deltas[++i].text;
        }
        Json call = Json::object();
        call["index"] = d.tool_index;
        call["id"] = chat_tool_call_id(meta_, d.tool_index, options_.choice_index);
        call["type"] = "function";
        call["function"] = Json{{"name", d.text}, {"arguments", arguments}};
        delta["tool_calls"] = Json::array({std::move(call)});
        break;
      }
      case OutputDeltaKind::tool_call_arguments: {
        Json call = Json::object();
        call["index"] = d.tool_index;
        call["function"] = Json{{"arguments", d.text}};
        delta["tool_calls"] = Json::array({std::move(call)});
        break;
      }
    }
    events.push_back(data_event(chunk(std::move(delta))));
  }
  return events;
}

StreamEvents ChatCompletionsStream::finish(OutputFinishReason reason, const ResponseUsage& usage) {
  Json last = chunk(Json{{"content", ""}});
  last["choices"][0]["finish_reason"] = chat_finish_reason_name(reason);
  last["usage"] = openai_usage_json(usage);
  return {data_event(last), done_event()};
}

StreamEvents ChatCompletionsStream::finish_choice(OutputFinishReason reason) {
  Json last = chunk(Json{{"content", ""}});
  last["choices"][0]["finish_reason"] = chat_finish_reason_name(reason);
  return {data_event(last)};
}

Json chat_completion_body(const ResponseMeta& meta, const ChatResponseOptions& options,
                          const CollectedOutput& output, OutputFinishReason reason,
                          const ResponseUsage& usage, const std::vector<TokenLogprobInfo>& logprobs) {
  Json message = Json::object();
  message["role"] = "assistant";
  message["content"] = output.content;
  // A model that opens <think> itself (V3 encoding, the demo model) gives reasoning without thinking
  // mode: it is returned as in the stream, where reasoning deltas always carry reasoning_content.
  if (options.thinking || !output.reasoning.empty()) message["reasoning_content"] = output.reasoning;
  if (!output.tool_calls.empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < output.tool_calls.size(); ++i) {
      const CollectedToolCall& c = output.tool_calls[i];
      calls.push_back(Json{{"id", chat_tool_call_id(meta, static_cast<int32_t>(i), options.choice_index)},
                           {"type", "function"},
                           {"function", Json{{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  Json choice = Json::object();
  choice["index"] = options.choice_index;
  choice["message"] = std::move(message);
  choice["logprobs"] =
      options.logprobs ? Json{{"content", openai_logprobs_content(logprobs)}} : Json(nullptr);
  choice["finish_reason"] = chat_finish_reason_name(reason);
  return openai_envelope(meta, "chat.completion", std::move(choice), openai_usage_json(usage));
}

}  // namespace ds::recipe
