#include "recipe/chat_completions_request.h"

#include <fmt/format.h>

#include "recipe/cache_fields.h"
#include "recipe/request_checks.h"
#include "recipe/request_error.h"
#include "recipe/structured_output_fields.h"

namespace ds::recipe {

namespace {

enum class ContentPartKind { text, unsupported_media, unknown };

// The part types OpenAI's APIs define: text ones are kept, media ones are refused as unsupported.
// (Comparing a string_view here, not the std::optional<std::string> in place, also keeps GCC 12 from
// a false -Wmaybe-uninitialized on the inlined compare in -fsanitize=thread builds.)
ContentPartKind content_part_kind(std::string_view type) {
  if (type == "text" || type == "input_text" || type == "output_text") return ContentPartKind::text;
  if (type == "image_url" || type == "input_image" || type == "input_audio" || type == "file" ||
      type == "input_file")
    return ContentPartKind::unsupported_media;
  return ContentPartKind::unknown;
}

}  // namespace

Result<std::string> read_openai_text_content(const Json& message, std::string_view key,
                                             std::string_view path) {
  const std::string field = join_path(path, key);
  const Json* v = find_field(message, key);
  if (v == nullptr) return std::string();
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array())
    return field_error(field, fmt::format("expected string or array, got {}", json_type_name(*v)));
  std::string text;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& part = (*v)[i];
    const std::string part_path = index_path(field, i);
    if (!part.is_object())
      return field_error(part_path, fmt::format("expected object, got {}", json_type_name(part)));
    DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(part, "type", part_path));
    if (!type.has_value()) return field_error(join_path(part_path, "type"), "required");
    const ContentPartKind kind = content_part_kind(*type);
    if (kind == ContentPartKind::text) {
      DS_ASSIGN_OR_RETURN(std::optional<std::string> part_text, read_string(part, "text", part_path));
      if (!part_text.has_value()) return field_error(join_path(part_path, "text"), "required");
      text += *part_text;
    } else if (kind == ContentPartKind::unsupported_media) {
      return unsupported_error(join_path(part_path, "type"),
                               fmt::format("'{}' content is not supported (text only: images and other media "
                                           "need an encoder this engine does not have)",
                                           *type));
    } else {
      return field_error(join_path(part_path, "type"), fmt::format("unknown content part type '{}'", *type));
    }
  }
  return text;
}

namespace {

Result<Role> parse_role(std::string_view role, std::string_view path) {
  if (role == "system") return Role::system;
  if (role == "user") return Role::user;
  if (role == "assistant") return Role::assistant;
  if (role == "tool") return Role::tool;
  if (role == "developer") return Role::developer;
  if (role == "latest_reminder") return Role::latest_reminder;
  return field_error(path,
                     fmt::format("unknown role '{}' (expected system, user, assistant, tool, developer or "
                                 "latest_reminder)",
                                 role));
}

Result<ToolCall> read_tool_call(const Json& call, const std::string& path) {
  if (!call.is_object())
    return field_error(path, fmt::format("expected object, got {}", json_type_name(call)));
  ToolCall out;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> id, read_string(call, "id", path));
  if (!id.has_value() || id->empty()) return field_error(join_path(path, "id"), "required");
  out.id = *id;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(call, "type", path));
  if (type.has_value() && *type != "function")
    return unsupported_error(join_path(path, "type"),
                             fmt::format("tool call type '{}' (only function)", *type));
  DS_ASSIGN_OR_RETURN(const Json* function, read_object(call, "function", path));
  const std::string fn_path = join_path(path, "function");
  DS_ASSIGN_OR_RETURN(std::optional<std::string> name, read_string(*function, "name", fn_path));
  if (!name.has_value()) return field_error(join_path(fn_path, "name"), "required");
  DS_TRY(check_tool_name(*name, join_path(fn_path, "name")));
  out.name = *name;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> arguments, read_string(*function, "arguments", fn_path));
  out.arguments_json = arguments.value_or("");
  if (!out.arguments_json.empty()) {
    // The encodings re-render arguments key by key, so they must be a JSON object.
    DS_ASSIGN_OR_RETURN(Json parsed,
                        parse_embedded_json(out.arguments_json, join_path(fn_path, "arguments")));
    if (!parsed.is_object()) return field_error(join_path(fn_path, "arguments"), "must be a JSON object");
  }
  return out;
}

Result<Message> read_message(const Json& raw, const std::string& path) {
  if (!raw.is_object()) return field_error(path, fmt::format("expected object, got {}", json_type_name(raw)));
  Message m;
  m.source_path = path;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> role, read_string(raw, "role", path));
  if (!role.has_value()) return field_error(join_path(path, "role"), "required");
  DS_ASSIGN_OR_RETURN(m.role, parse_role(*role, join_path(path, "role")));
  if (m.role == Role::latest_reminder) {
    DS_ASSIGN_OR_RETURN(std::optional<std::string> text, read_string(raw, "content", path));
    if (!text.has_value()) return field_error(join_path(path, "content"), "required");
    m.content = *text;
  } else {
    if (m.role != Role::assistant && find_field(raw, "content") == nullptr)
      return field_error(join_path(path, "content"), "required");
    DS_ASSIGN_OR_RETURN(m.content, read_openai_text_content(raw, "content", path));
  }
  DS_ASSIGN_OR_RETURN(std::optional<std::string> name, read_string(raw, "name", path));
  m.name = name.value_or("");
  if (m.role == Role::assistant) {
    DS_ASSIGN_OR_RETURN(std::optional<std::string> reasoning, read_string(raw, "reasoning_content", path));
    m.reasoning_content = reasoning.value_or("");
    DS_ASSIGN_OR_RETURN(std::optional<bool> prefix, read_bool(raw, "prefix", path));
    m.prefix = prefix.value_or(false);
    if (const Json* calls = find_field(raw, "tool_calls"); calls != nullptr) {
      const std::string calls_path = join_path(path, "tool_calls");
      if (!calls->is_array())
        return field_error(calls_path, fmt::format("expected array, got {}", json_type_name(*calls)));
      for (size_t k = 0; k < calls->size(); ++k) {
        DS_ASSIGN_OR_RETURN(ToolCall call, read_tool_call((*calls)[k], index_path(calls_path, k)));
        m.tool_calls.push_back(std::move(call));
      }
    }
  } else {
    for (const char* key : {"tool_calls", "reasoning_content", "prefix"})
      if (find_field(raw, key) != nullptr)
        return field_error(join_path(path, key),
                           fmt::format("allowed only on assistant messages, not {}", *role));
  }
  if (m.role == Role::tool) {
    DS_ASSIGN_OR_RETURN(std::optional<std::string> call_id, read_string(raw, "tool_call_id", path));
    if (!call_id.has_value() || call_id->empty())
      return field_error(join_path(path, "tool_call_id"), "required");
    m.tool_call_id = *call_id;
  }
  return m;
}

Result<Tool> read_tool(const Json& raw, const std::string& path, const RequestLimits& limits) {
  if (!raw.is_object()) return field_error(path, fmt::format("expected object, got {}", json_type_name(raw)));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(raw, "type", path));
  if (!type.has_value()) return field_error(join_path(path, "type"), "required");
  if (*type != "function")
    return unsupported_error(join_path(path, "type"), fmt::format("tool type '{}' (only function)", *type));
  DS_ASSIGN_OR_RETURN(const Json* function, read_object(raw, "function", path));
  const std::string fn_path = join_path(path, "function");
  Tool tool;
  tool.source_path = path;
  DS_ASSIGN_OR_RETURN(std::optional<std::string> name, read_string(*function, "name", fn_path));
  if (!name.has_value()) return field_error(join_path(fn_path, "name"), "required");
  DS_TRY(check_tool_name(*name, join_path(fn_path, "name")));
  tool.name = *name;
  DS_ASSIGN_OR_RETURN(tool.description, read_string(*function, "description", fn_path));
  if (const Json* params = find_field(*function, "parameters"); params != nullptr) {
    if (!params->is_object())
      return field_error(join_path(fn_path, "parameters"),
                         fmt::format("expected object, got {}", json_type_name(*params)));
    tool.parameters_json = params->dump();
    DS_TRY(check_tool_schema_size(tool.parameters_json, join_path(fn_path, "parameters"), limits));
  }
  DS_ASSIGN_OR_RETURN(std::optional<bool> strict, read_bool(*function, "strict", fn_path));
  tool.strict = strict.value_or(false);
  return tool;
}

Result<ToolChoice> read_tool_choice(const Json& body) {
  const Json* v = find_field(body, "tool_choice");
  if (v == nullptr) return ToolChoice{};
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto") return ToolChoice{ToolChoiceKind::auto_choice, ""};
    if (s == "none") return ToolChoice{ToolChoiceKind::none, ""};
    if (s == "required") return ToolChoice{ToolChoiceKind::required, ""};
    return field_error("tool_choice", fmt::format("unknown value '{}' (expected none, auto or required)", s));
  }
  if (!v->is_object())
    return field_error("tool_choice", fmt::format("expected string or object, got {}", json_type_name(*v)));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(*v, "type", "tool_choice"));
  if (type.value_or("") != "function") return field_error("tool_choice.type", "expected \"function\"");
  DS_ASSIGN_OR_RETURN(const Json* function, read_object(*v, "function", "tool_choice"));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> name,
                      read_string(*function, "name", "tool_choice.function"));
  if (!name.has_value()) return field_error("tool_choice.function.name", "required");
  return ToolChoice{ToolChoiceKind::named, *name};
}

Result<ResponseFormat> read_response_format(const Json& body) {
  ResponseFormat out;
  const Json* v = find_field(body, "response_format");
  if (v == nullptr) return out;
  if (!v->is_object())
    return field_error("response_format", fmt::format("expected object, got {}", json_type_name(*v)));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(*v, "type", "response_format"));
  if (!type.has_value()) return field_error("response_format.type", "required");
  if (*type == "text") return out;
  if (*type == "json_object") {
    out.kind = ResponseFormatKind::json_object;
    return out;
  }
  if (*type == "json_schema") {
    out.kind = ResponseFormatKind::json_schema;
    DS_ASSIGN_OR_RETURN(const Json* js, read_object(*v, "json_schema", "response_format"));
    DS_ASSIGN_OR_RETURN(std::optional<std::string> name,
                        read_string(*js, "name", "response_format.json_schema"));
    if (!name.has_value()) return field_error("response_format.json_schema.name", "required");
    out.schema_name = *name;
    DS_ASSIGN_OR_RETURN(const Json* schema, read_object(*js, "schema", "response_format.json_schema"));
    out.schema_json = schema->dump();
    out.field = "response_format.json_schema.schema";
    DS_ASSIGN_OR_RETURN(std::optional<bool> strict, read_bool(*js, "strict", "response_format.json_schema"));
    out.strict = strict.value_or(false);
    return out;
  }
  return unsupported_error("response_format.type",
                           fmt::format("'{}' (only text, json_object and json_schema are supported)", *type));
}

Status reject_unsupported_fields(const Json& body) {
  for (const char* key : {"functions", "function_call", "audio", "prediction", "web_search_options"})
    if (find_field(body, key) != nullptr) return unsupported_error(key, "not supported");
  if (const Json* bias = find_field(body, "logit_bias");
      bias != nullptr && !(bias->is_object() && bias->empty()))
    return unsupported_error("logit_bias", "not supported");
  if (const Json* modalities = find_field(body, "modalities"); modalities != nullptr) {
    if (!(modalities->is_array() && modalities->size() == 1 && (*modalities)[0] == "text"))
      return unsupported_error("modalities", "only [\"text\"] is supported");
  }
  return ok_status();
}

}  // namespace

Result<ChatRequest> convert_chat_completions_request(const Json& body, const ConversionOptions& options) {
  if (!body.is_object()) return field_error("body", "expected object");
  ChatRequest req;
  req.api = ApiKind::chat_completions;
  DS_TRY(reject_unsupported_fields(body));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> model, read_string(body, "model", ""));
  if (!model.has_value() || model->empty()) return field_error("model", "required");
  req.model = *model;

  DS_ASSIGN_OR_RETURN(const Json* messages, read_array(body, "messages", ""));
  for (size_t i = 0; i < messages->size(); ++i) {
    DS_ASSIGN_OR_RETURN(Message m, read_message((*messages)[i], index_path("messages", i)));
    req.messages.push_back(std::move(m));
  }
  if (const Json* tools = find_field(body, "tools"); tools != nullptr) {
    if (!tools->is_array())
      return field_error("tools", fmt::format("expected array, got {}", json_type_name(*tools)));
    for (size_t i = 0; i < tools->size(); ++i) {
      DS_ASSIGN_OR_RETURN(Tool tool, read_tool((*tools)[i], index_path("tools", i), options.limits));
      req.tools.push_back(std::move(tool));
    }
  }
  DS_ASSIGN_OR_RETURN(req.tool_choice, read_tool_choice(body));
  DS_ASSIGN_OR_RETURN(std::optional<bool> parallel, read_bool(body, "parallel_tool_calls", ""));
  req.parallel_tool_calls = parallel.value_or(true);

  DS_ASSIGN_OR_RETURN(std::optional<bool> thinking_switch, read_thinking_switch(body, "thinking", req));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> effort_text, read_string(body, "reasoning_effort", ""));
  std::optional<std::optional<ReasoningEffort>> effort;
  if (effort_text.has_value()) {
    DS_ASSIGN_OR_RETURN(effort, parse_reasoning_effort(*effort_text, "reasoning_effort"));
  }
  resolve_thinking(req, thinking_switch, effort, options);

  DS_ASSIGN_OR_RETURN(req.response_format, read_response_format(body));
  DS_TRY(read_structured_output_fields(body, req.response_format));
  DS_TRY(read_openai_sampling(body, options.limits, OpenAiApi::chat_completions, req.sampling));

  DS_ASSIGN_OR_RETURN(std::optional<bool> stream, read_bool(body, "stream", ""));
  req.stream = stream.value_or(false);
  if (const Json* stream_options = find_field(body, "stream_options"); stream_options != nullptr) {
    if (!req.stream) return field_error("stream_options", "allowed only when stream is true");
    if (!stream_options->is_object()) return field_error("stream_options", "expected object");
    DS_ASSIGN_OR_RETURN(std::optional<bool> usage,
                        read_bool(*stream_options, "include_usage", "stream_options"));
    req.include_usage = usage.value_or(false);
  }
  DS_ASSIGN_OR_RETURN(std::optional<std::string> user, read_string(body, "user", ""));
  req.user = user.value_or("");
  DS_TRY(read_openai_cache_fields(body, req.cache));
  DS_TRY(read_cache_object(body, req.cache));

  DS_TRY(finalize_tools(req, "tool_choice", options.limits));
  DS_TRY(check_conversation(req, options));
  return req;
}

Result<ChatRequest> parse_chat_completions_request(std::string_view body, const ConversionOptions& options) {
  DS_ASSIGN_OR_RETURN(Json json, parse_request_body(body));
  return convert_chat_completions_request(json, options);
}

}  // namespace ds::recipe
