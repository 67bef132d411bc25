#include "recipe/responses_request.h"

#include <fmt/format.h>

#include "recipe/cache_fields.h"
#include "recipe/chat_completions_request.h"
#include "recipe/request_checks.h"
#include "recipe/request_error.h"
#include "recipe/structured_output_fields.h"

namespace ds::recipe {

namespace {

Result<std::string> required_string(const Json& obj, std::string_view key, const std::string& path) {
  DS_ASSIGN_OR_RETURN(std::optional<std::string> v, read_string(obj, key, path));
  if (!v.has_value()) return field_error(join_path(path, key), "required");
  return *v;
}

// The assistant message that function_call / reasoning items extend: the previous message when it
// is an assistant one (one model turn is several output items), else a new one.
Message& assistant_turn(std::vector<Message>& out, const std::string& path) {
  if (out.empty() || out.back().role != Role::assistant) {
    Message m;
    m.role = Role::assistant;
    m.source_path = path;
    out.push_back(std::move(m));
  }
  return out.back();
}

Status convert_item(const Json& item, const std::string& path, std::vector<Message>& out) {
  if (!item.is_object())
    return field_error(path, fmt::format("expected object, got {}", json_type_name(item)));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type_opt, read_string(item, "type", path));
  const std::string type = type_opt.value_or("message");  // EasyInputMessage has no type
  if (type == "message") {
    DS_ASSIGN_OR_RETURN(std::string role, required_string(item, "role", path));
    Message m;
    m.source_path = path;
    if (role == "user") {
      m.role = Role::user;
    } else if (role == "assistant") {
      m.role = Role::assistant;
    } else if (role == "system") {
      m.role = Role::system;
    } else if (role == "developer") {
      m.role = Role::developer;
    } else {
      return field_error(
          join_path(path, "role"),
          fmt::format("unknown role '{}' (expected user, assistant, system or developer)", role));
    }
    if (find_field(item, "content") == nullptr) return field_error(join_path(path, "content"), "required");
    DS_ASSIGN_OR_RETURN(m.content, read_openai_text_content(item, "content", path));
    if (m.role == Role::assistant) {
      Message& turn = assistant_turn(out, path);
      turn.content += m.content;
      return ok_status();
    }
    out.push_back(std::move(m));
    return ok_status();
  }
  if (type == "function_call") {
    ToolCall call;
    DS_ASSIGN_OR_RETURN(call.id, required_string(item, "call_id", path));
    DS_ASSIGN_OR_RETURN(call.name, required_string(item, "name", path));
    DS_TRY(check_tool_name(call.name, join_path(path, "name")));
    DS_ASSIGN_OR_RETURN(call.arguments_json, required_string(item, "arguments", path));
    if (!call.arguments_json.empty()) {
      DS_ASSIGN_OR_RETURN(Json parsed,
                          parse_embedded_json(call.arguments_json, join_path(path, "arguments")));
      if (!parsed.is_object()) return field_error(join_path(path, "arguments"), "must be a JSON object");
    }
    assistant_turn(out, path).tool_calls.push_back(std::move(call));
    return ok_status();
  }
  if (type == "function_call_output") {
    Message m;
    m.role = Role::tool;
    m.source_path = path;
    DS_ASSIGN_OR_RETURN(m.tool_call_id, required_string(item, "call_id", path));
    if (find_field(item, "output") == nullptr) return field_error(join_path(path, "output"), "required");
    DS_ASSIGN_OR_RETURN(m.content, read_openai_text_content(item, "output", path));
    out.push_back(std::move(m));
    return ok_status();
  }
  if (type == "reasoning") {
    if (find_field(item, "encrypted_content") != nullptr)
      return unsupported_error(join_path(path, "encrypted_content"), "encrypted reasoning is not supported");
    // Prefer the full reasoning text; fall back to the summary.
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const Json* parts = find_field(item, key);
      if (parts == nullptr || !text.empty()) continue;
      const std::string parts_path = join_path(path, key);
      if (!parts->is_array()) return field_error(parts_path, "expected array");
      for (size_t i = 0; i < parts->size(); ++i) {
        const std::string part_path = index_path(parts_path, i);
        if (!(*parts)[i].is_object()) return field_error(part_path, "expected object");
        DS_ASSIGN_OR_RETURN(std::string part, required_string((*parts)[i], "text", part_path));
        if (!text.empty()) text += "\n\n";
        text += part;
      }
    }
    Message& turn = assistant_turn(out, path);
    turn.reasoning_content += text;
    return ok_status();
  }
  if (type == "item_reference")
    return unsupported_error(join_path(path, "type"),
                             "item references need stored responses (stateless API)");
  return unsupported_error(join_path(path, "type"),
                           fmt::format("input item type '{}' is not supported", type));
}

Status convert_tools(const Json& body, ChatRequest& req, const RequestLimits& limits) {
  const Json* tools = find_field(body, "tools");
  if (tools == nullptr) return ok_status();
  if (!tools->is_array())
    return field_error("tools", fmt::format("expected array, got {}", json_type_name(*tools)));
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& raw = (*tools)[i];
    const std::string path = index_path("tools", i);
    if (!raw.is_object()) return field_error(path, "expected object");
    DS_ASSIGN_OR_RETURN(std::string type, required_string(raw, "type", path));
    if (type == "web_search" || type == "web_search_preview") continue;  // ignored, as deepseek-recipe does
    if (type != "function")
      return unsupported_error(join_path(path, "type"), fmt::format("tool type '{}' is not supported", type));
    Tool tool;
    tool.source_path = path;
    DS_ASSIGN_OR_RETURN(tool.name, required_string(raw, "name", path));
    DS_TRY(check_tool_name(tool.name, join_path(path, "name")));
    DS_ASSIGN_OR_RETURN(tool.description, read_string(raw, "description", path));
    if (const Json* params = find_field(raw, "parameters"); params != nullptr) {
      if (!params->is_object()) return field_error(join_path(path, "parameters"), "expected object");
      tool.parameters_json = params->dump();
      DS_TRY(check_tool_schema_size(tool.parameters_json, join_path(path, "parameters"), limits));
    }
    DS_ASSIGN_OR_RETURN(std::optional<bool> strict, read_bool(raw, "strict", path));
    tool.strict = strict.value_or(false);
    req.tools.push_back(std::move(tool));
  }
  return ok_status();
}

Result<ToolChoice> convert_tool_choice(const Json& body) {
  const Json* v = find_field(body, "tool_choice");
  if (v == nullptr) return ToolChoice{};
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto") return ToolChoice{ToolChoiceKind::auto_choice, ""};
    if (s == "none") return ToolChoice{ToolChoiceKind::none, ""};
    if (s == "required") return ToolChoice{ToolChoiceKind::required, ""};
    return field_error("tool_choice", fmt::format("unknown value '{}' (expected none, auto or required)", s));
  }
  if (!v->is_object()) return field_error("tool_choice", "expected string or object");
  DS_ASSIGN_OR_RETURN(std::string type, required_string(*v, "type", "tool_choice"));
  if (type != "function")
    return unsupported_error("tool_choice.type", fmt::format("'{}' (only function is supported)", type));
  DS_ASSIGN_OR_RETURN(std::string name, required_string(*v, "name", "tool_choice"));
  return ToolChoice{ToolChoiceKind::named, name};
}

Result<ResponseFormat> convert_text_format(const Json& body) {
  ResponseFormat out;
  const Json* text = find_field(body, "text");
  if (text == nullptr) return out;
  if (!text->is_object()) return field_error("text", "expected object");
  const Json* format = find_field(*text, "format");
  if (format == nullptr) return out;
  if (!format->is_object()) return field_error("text.format", "expected object");
  DS_ASSIGN_OR_RETURN(std::string type, required_string(*format, "type", "text.format"));
  if (type == "text") return out;
  if (type == "json_object") {
    out.kind = ResponseFormatKind::json_object;
    return out;
  }
  if (type == "json_schema") {
    out.kind = ResponseFormatKind::json_schema;
    DS_ASSIGN_OR_RETURN(out.schema_name, required_string(*format, "name", "text.format"));
    DS_ASSIGN_OR_RETURN(const Json* schema, read_object(*format, "schema", "text.format"));
    out.schema_json = schema->dump();
    out.field = "text.format.schema";
    DS_ASSIGN_OR_RETURN(std::optional<bool> strict, read_bool(*format, "strict", "text.format"));
    out.strict = strict.value_or(false);
    return out;
  }
  return unsupported_error("text.format.type",
                           fmt::format("'{}' (only text, json_object and json_schema are supported)", type));
}

}  // namespace

Result<ChatRequest> convert_responses_request(const Json& body, const ConversionOptions& options) {
  if (!body.is_object()) return field_error("body", "expected object");
  for (const char* key : {"previous_response_id", "conversation", "prompt"})
    if (find_field(body, key) != nullptr)
      return unsupported_error(key, "not supported: the Responses API here is stateless");
  DS_ASSIGN_OR_RETURN(std::optional<bool> background, read_bool(body, "background", ""));
  if (background.value_or(false))
    return unsupported_error("background", "background responses are not supported");

  ChatRequest req;
  req.api = ApiKind::responses;
  DS_ASSIGN_OR_RETURN(req.model, required_string(body, "model", ""));
  if (req.model.empty()) return field_error("model", "required");
  DS_ASSIGN_OR_RETURN(std::optional<std::string> instructions, read_string(body, "instructions", ""));
  if (instructions.has_value()) {
    Message sys;
    sys.role = Role::system;
    sys.content = *instructions;
    sys.source_path = "instructions";
    req.messages.push_back(std::move(sys));
  }
  const Json* input = find_field(body, "input");
  if (input == nullptr) return field_error("input", "required");
  if (input->is_string()) {
    Message user;
    user.role = Role::user;
    user.content = input->get<std::string>();
    user.source_path = "input";
    req.messages.push_back(std::move(user));
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i)
      DS_TRY(convert_item((*input)[i], index_path("input", i), req.messages));
  } else {
    return field_error("input", fmt::format("expected string or array, got {}", json_type_name(*input)));
  }

  DS_TRY(convert_tools(body, req, options.limits));
  DS_ASSIGN_OR_RETURN(req.tool_choice, convert_tool_choice(body));
  DS_ASSIGN_OR_RETURN(std::optional<bool> parallel, read_bool(body, "parallel_tool_calls", ""));
  req.parallel_tool_calls = parallel.value_or(true);

  std::optional<std::optional<ReasoningEffort>> effort;
  if (const Json* reasoning = find_field(body, "reasoning"); reasoning != nullptr) {
    if (!reasoning->is_object()) return field_error("reasoning", "expected object");
    DS_ASSIGN_OR_RETURN(std::optional<std::string> effort_text,
                        read_string(*reasoning, "effort", "reasoning"));
    if (effort_text.has_value()) {
      DS_ASSIGN_OR_RETURN(effort, parse_reasoning_effort(*effort_text, "reasoning.effort"));
    }
  }
  resolve_thinking(req, std::nullopt, effort, options);
  DS_ASSIGN_OR_RETURN(req.response_format, convert_text_format(body));
  DS_TRY(read_structured_output_fields(body, req.response_format));

  DS_ASSIGN_OR_RETURN(req.sampling.temperature, read_number(body, "temperature", ""));
  if (req.sampling.temperature) DS_TRY(check_range(*req.sampling.temperature, 0.0, 2.0, "temperature"));
  DS_ASSIGN_OR_RETURN(req.sampling.top_p, read_number(body, "top_p", ""));
  if (req.sampling.top_p) DS_TRY(check_range(*req.sampling.top_p, 0.0, 1.0, "top_p", /*lo_exclusive=*/true));
  DS_ASSIGN_OR_RETURN(req.sampling.max_tokens, read_integer(body, "max_output_tokens", ""));
  if (req.sampling.max_tokens)
    DS_TRY(check_max_tokens(*req.sampling.max_tokens, "max_output_tokens", options.limits));
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, read_integer(body, "top_logprobs", ""));
  if (top_logprobs) {
    DS_TRY(check_range(static_cast<double>(*top_logprobs), 0, 20, "top_logprobs"));
    req.sampling.logprobs = true;
    req.sampling.top_logprobs = static_cast<int32_t>(*top_logprobs);
  }
  DS_ASSIGN_OR_RETURN(std::optional<bool> stream, read_bool(body, "stream", ""));
  req.stream = stream.value_or(false);
  req.include_usage = req.stream;  // response.completed always carries usage
  DS_ASSIGN_OR_RETURN(std::optional<std::string> user, read_string(body, "user", ""));
  req.user = user.value_or("");
  DS_TRY(read_openai_cache_fields(body, req.cache));
  DS_TRY(read_cache_object(body, req.cache));

  DS_TRY(finalize_tools(req, "tool_choice", options.limits));
  DS_TRY(check_conversation(req, options, ConversationPaths{"input", "text.format"}));
  return req;
}

Result<ChatRequest> parse_responses_request(std::string_view body, const ConversionOptions& options) {
  DS_ASSIGN_OR_RETURN(Json json, parse_request_body(body));
  return convert_responses_request(json, options);
}

}  // namespace ds::recipe
