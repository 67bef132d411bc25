#include "recipe/request_checks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "recipe/request_error.h"

namespace ds::recipe {

Result<std::optional<ReasoningEffort>> parse_reasoning_effort(std::string_view text, std::string_view path) {
  using E = ReasoningEffort;
  if (text == "none") return std::optional<E>();
  if (text == "minimal" || text == "low") return std::optional<E>(E::low);
  if (text == "medium" || text == "high") return std::optional<E>(E::high);
  if (text == "xhigh") return std::optional<E>(E::xhigh);
  if (text == "max" || text == "ultra") return std::optional<E>(E::max);
  return field_error(
      path, fmt::format("unknown reasoning effort '{}' (expected none, minimal, low, medium, high, xhigh, "
                        "max or ultra)",
                        text));
}

void resolve_thinking(ChatRequest& request, std::optional<bool> thinking_switch,
                      std::optional<std::optional<ReasoningEffort>> effort,
                      const ConversionOptions& options) {
  request.thinking_explicit = thinking_switch.has_value() || effort.has_value();
  if (thinking_switch.has_value()) {
    request.thinking = *thinking_switch;
  } else if (effort.has_value()) {
    request.thinking = effort->has_value();
  } else {
    request.thinking = options.default_thinking;
  }
  request.reasoning_effort = effort.has_value() && effort->has_value() ? **effort : options.default_effort;
}

Result<std::optional<bool>> read_thinking_switch(const Json& body, std::string_view key,
                                                 ChatRequest& request) {
  const Json* v = find_field(body, key);
  if (v == nullptr) return std::optional<bool>();
  const std::string path(key);
  if (!v->is_object()) return field_error(path, fmt::format("expected object, got {}", json_type_name(*v)));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(*v, "type", path));
  if (!type.has_value()) return field_error(join_path(path, "type"), "required");
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> budget, read_integer(*v, "budget_tokens", path));
  if (budget.has_value()) {
    if (*budget < 1) return field_error(join_path(path, "budget_tokens"), "must be at least 1");
    request.thinking_budget_tokens = budget;
  }
  if (*type == "enabled" || *type == "adaptive") return std::optional<bool>(true);
  if (*type == "disabled") return std::optional<bool>(false);
  return field_error(join_path(path, "type"),
                     fmt::format("unknown value '{}' (expected enabled, adaptive or disabled)", *type));
}

Result<std::vector<std::string>> read_stop_sequences(const Json& obj, std::string_view key,
                                                     std::string_view path, const RequestLimits& limits) {
  const std::string field = join_path(path, key);
  const Json* v = find_field(obj, key);
  std::vector<std::string> stops;
  if (v == nullptr) return stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& item = (*v)[i];
      if (!item.is_string())
        return field_error(index_path(field, i),
                           fmt::format("expected string, got {}", json_type_name(item)));
      stops.push_back(item.get<std::string>());
    }
  } else {
    return field_error(field, fmt::format("expected string or array of strings, got {}", json_type_name(*v)));
  }
  if (stops.size() > limits.max_stop_sequences)
    return field_error(field, fmt::format("at most {} stop sequences are allowed, got {}",
                                          limits.max_stop_sequences, stops.size()));
  for (size_t i = 0; i < stops.size(); ++i) {
    const std::string item_path = v->is_array() ? index_path(field, i) : field;
    if (stops[i].empty()) return field_error(item_path, "stop sequence must not be empty");
    if (stops[i].size() > limits.max_stop_bytes)
      return field_error(item_path, fmt::format("stop sequence longer than {} bytes", limits.max_stop_bytes));
  }
  return stops;
}

Status check_range(double value, double lo, double hi, std::string_view path, bool lo_exclusive) {
  const bool below = lo_exclusive ? value <= lo : value < lo;
  if (below || value > hi)
    return field_error(path,
                       fmt::format("must be in {}{}, {}], got {}", lo_exclusive ? "(" : "[", lo, hi, value));
  return ok_status();
}

Status check_max_tokens(int64_t max_tokens, std::string_view path, const RequestLimits& limits) {
  if (max_tokens < 1) return field_error(path, fmt::format("must be at least 1, got {}", max_tokens));
  if (max_tokens > limits.max_tokens_cap)
    return field_error(path, fmt::format("must be at most {}, got {}", limits.max_tokens_cap, max_tokens));
  return ok_status();
}

Status check_tool_name(std::string_view name, std::string_view path) {
  if (name.empty() || name.size() > 64) return field_error(path, "tool name must be 1 to 64 characters");
  for (char c : name) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok)
      return field_error(
          path, fmt::format("tool name '{}' may contain only letters, digits, '_', '-', '.' and ':'", name));
  }
  return ok_status();
}

Status check_tool_schema_size(std::string_view schema_json, std::string_view path,
                              const RequestLimits& limits) {
  if (schema_json.size() > limits.max_tool_schema_bytes)
    return field_error(path, fmt::format("schema is {} bytes as compact JSON, at most {} are allowed",
                                         schema_json.size(), limits.max_tool_schema_bytes));
  return ok_status();
}

Status finalize_tools(ChatRequest& request, std::string_view tool_choice_path, const RequestLimits& limits) {
  if (request.tools.size() > limits.max_tools)
    return field_error(
        "tools", fmt::format("at most {} tools are allowed, got {}", limits.max_tools, request.tools.size()));
  std::set<std::string, std::less<>> names;
  for (const Tool& tool : request.tools) {
    if (!names.insert(tool.name).second)
      return field_error(join_path(tool.source_path, "name"),
                         fmt::format("duplicate tool name '{}'", tool.name));
  }
  ToolChoice& choice = request.tool_choice;
  if (choice.kind == ToolChoiceKind::named) {
    auto it = std::find_if(request.tools.begin(), request.tools.end(),
                           [&](const Tool& t) { return t.name == choice.name; });
    if (it == request.tools.end())
      return field_error(tool_choice_path,
                         fmt::format("names tool '{}', which is not in tools", choice.name));
    Tool kept = *it;
    request.tools = {std::move(kept)};
  }
  const bool forced = choice.kind == ToolChoiceKind::required || choice.kind == ToolChoiceKind::named;
  if (forced && request.tools.empty())
    return field_error(tool_choice_path, "requires a tool call but no tools are given");
  if (forced && request.thinking)
    return field_error(
        tool_choice_path,
        "a required or named tool choice is not supported in thinking mode; turn thinking off");
  return ok_status();
}

namespace {

bool contains_json_word(std::string_view text) {
  for (size_t i = 0; i + 4 <= text.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) == 'j' &&
        std::tolower(static_cast<unsigned char>(text[i + 1])) == 's' &&
        std::tolower(static_cast<unsigned char>(text[i + 2])) == 'o' &&
        std::tolower(static_cast<unsigned char>(text[i + 3])) == 'n')
      return true;
  }
  return false;
}

}  // namespace

Status check_conversation(const ChatRequest& request, const ConversionOptions& options,
                          const ConversationPaths& paths) {
  const std::vector<Message>& msgs = request.messages;
  if (msgs.empty()) return field_error(paths.messages, "must contain at least one message");
  if (msgs.size() > options.limits.max_messages)
    return field_error(paths.messages, fmt::format("at most {} messages are allowed, got {}",
                                                   options.limits.max_messages, msgs.size()));
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    if (m.prefix && (m.role != Role::assistant || i + 1 != msgs.size()))
      return field_error(join_path(m.source_path, "prefix"),
                         "allowed only on the last message, an assistant one");
    if (m.tool_calls.size() > options.limits.max_tool_calls_per_message)
      return field_error(
          join_path(m.source_path, "tool_calls"),
          fmt::format("at most {} tool calls are allowed", options.limits.max_tool_calls_per_message));
    if (m.role == Role::tool) {
      // Tool results must sit right after the assistant message that made the calls.
      size_t j = i;
      while (j > 0 && msgs[j - 1].role == Role::tool) --j;
      if (j == 0 || msgs[j - 1].role != Role::assistant || msgs[j - 1].tool_calls.empty())
        return field_error(m.source_path, "a tool message must follow an assistant message with tool_calls");
      continue;
    }
    if (m.role != Role::assistant || m.tool_calls.empty()) continue;
    std::set<std::string, std::less<>> pending;
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (!pending.insert(m.tool_calls[k].id).second)
        return field_error(join_path(index_path(join_path(m.source_path, "tool_calls"), k), "id"),
                           fmt::format("duplicate tool call id '{}'", m.tool_calls[k].id));
    }
    size_t j = i + 1;
    for (; j < msgs.size() && msgs[j].role == Role::tool; ++j) {
      if (pending.erase(msgs[j].tool_call_id) == 0)
        return field_error(
            join_path(msgs[j].source_path, "tool_call_id"),
            fmt::format("'{}' answers no outstanding tool call of {}", msgs[j].tool_call_id, m.source_path));
    }
    if (!pending.empty() && !(j == msgs.size() && m.prefix))
      return field_error(
          m.source_path,
          fmt::format("tool call '{}' has no tool message answering it right after", *pending.begin()));
  }
  if (request.response_format.kind == ResponseFormatKind::json_object &&
      options.require_json_word_for_json_object) {
    const bool found = std::any_of(msgs.begin(), msgs.end(), [](const Message& m) {
      return (m.role == Role::system || m.role == Role::user || m.role == Role::developer) &&
             contains_json_word(m.content);
    });
    if (!found)
      return field_error(
          paths.response_format,
          "json_object requires the word \"json\" in a system or user message (DeepSeek's rule)");
  }
  return ok_status();
}

Status read_openai_sampling(const Json& body, const RequestLimits& limits, OpenAiApi api, SamplingFields& s) {
  DS_ASSIGN_OR_RETURN(s.temperature, read_number(body, "temperature", ""));
  if (s.temperature) DS_TRY(check_range(*s.temperature, 0.0, 2.0, "temperature"));
  DS_ASSIGN_OR_RETURN(s.top_p, read_number(body, "top_p", ""));
  if (s.top_p) DS_TRY(check_range(*s.top_p, 0.0, 1.0, "top_p", /*lo_exclusive=*/true));
  DS_ASSIGN_OR_RETURN(std::optional<double> presence, read_number(body, "presence_penalty", ""));
  if (presence) DS_TRY(check_range(*presence, -2.0, 2.0, "presence_penalty"));
  s.presence_penalty = presence.value_or(0.0);
  DS_ASSIGN_OR_RETURN(std::optional<double> frequency, read_number(body, "frequency_penalty", ""));
  if (frequency) DS_TRY(check_range(*frequency, -2.0, 2.0, "frequency_penalty"));
  s.frequency_penalty = frequency.value_or(0.0);
  // max_completion_tokens is OpenAI's newer name; it wins when both are sent.
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, read_integer(body, "max_tokens", ""));
  if (max_tokens) DS_TRY(check_max_tokens(*max_tokens, "max_tokens", limits));
  std::optional<int64_t> max_completion;
  if (api == OpenAiApi::chat_completions) {
    DS_ASSIGN_OR_RETURN(max_completion, read_integer(body, "max_completion_tokens", ""));
  }
  if (max_completion) DS_TRY(check_max_tokens(*max_completion, "max_completion_tokens", limits));
  s.max_tokens = max_completion ? max_completion : max_tokens;
  DS_ASSIGN_OR_RETURN(s.stop, read_stop_sequences(body, "stop", "", limits));
  DS_ASSIGN_OR_RETURN(s.seed, read_integer(body, "seed", ""));
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> n, read_integer(body, "n", ""));
  if (n.has_value() && (*n < 1 || *n > limits.max_choices))
    return field_error(
        "n", fmt::format("must be 1 to {} (the server's --max-choices), got {}", limits.max_choices, *n));
  s.n = static_cast<int32_t>(n.value_or(1));
  std::optional<int64_t> top_logprobs;
  if (api == OpenAiApi::completions) {
    // Legacy Completions: `logprobs` is the number of alternatives per token (0..5 in OpenAI's
    // docs; the same 0..20 bound as top_logprobs here).
    DS_ASSIGN_OR_RETURN(top_logprobs, read_integer(body, "logprobs", ""));
    s.logprobs = top_logprobs.has_value();
    if (top_logprobs) DS_TRY(check_range(static_cast<double>(*top_logprobs), 0, 20, "logprobs"));
    if (top_logprobs) s.top_logprobs = static_cast<int32_t>(*top_logprobs);
    return ok_status();
  }
  DS_ASSIGN_OR_RETURN(std::optional<bool> logprobs, read_bool(body, "logprobs", ""));
  s.logprobs = logprobs.value_or(false);
  DS_ASSIGN_OR_RETURN(top_logprobs, read_integer(body, "top_logprobs", ""));
  if (top_logprobs) {
    DS_TRY(check_range(static_cast<double>(*top_logprobs), 0, 20, "top_logprobs"));
    if (!s.logprobs) return field_error("top_logprobs", "requires logprobs to be true");
    s.top_logprobs = static_cast<int32_t>(*top_logprobs);
  }
  return ok_status();
}

}  // namespace ds::recipe
