#include "recipe/anthropic_messages_request.h"

#include <fmt/format.h>

#include "recipe/cache_fields.h"
#include "recipe/request_checks.h"
#include "recipe/request_error.h"

namespace ds::recipe {

namespace {

Status expect_object(const Json& v, const std::string& path) {
  if (!v.is_object()) return field_error(path, fmt::format("expected object, got {}", json_type_name(v)));
  return ok_status();
}

Result<std::string> required_string(const Json& obj, std::string_view key, const std::string& path) {
  DS_ASSIGN_OR_RETURN(std::optional<std::string> v, read_string(obj, key, path));
  if (!v.has_value()) return field_error(join_path(path, key), "required");
  return *v;
}

// Text of a string or an array of {"type":"text"} blocks (system prompts, tool_result content).
// Cache breakpoints on its blocks go to `breakpoints` under `section`.
Result<std::string> text_of_blocks(const Json& v, const std::string& path, AnthropicBreakpoints& breakpoints,
                                   BreakpointSection section) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    return field_error(path, fmt::format("expected string or array, got {}", json_type_name(v)));
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string block_path = index_path(path, i);
    DS_TRY(expect_object(v[i], block_path));
    DS_ASSIGN_OR_RETURN(std::string type, required_string(v[i], "type", block_path));
    if (type != "text")
      return unsupported_error(join_path(block_path, "type"),
                               fmt::format("'{}' blocks are not supported here", type));
    DS_ASSIGN_OR_RETURN(std::string part, required_string(v[i], "text", block_path));
    DS_TRY(breakpoints.read(v[i], block_path, section));
    // Anthropic tool_result text blocks are separate paragraphs; system blocks likewise.
    if (i > 0) text += "\n\n";
    text += part;
  }
  return text;
}

// One Anthropic message becomes one or more Messages: a user message's tool_result blocks become
// tool messages (placed first, as they answer the previous assistant turn), its text a user message.
Status convert_message(const Json& raw, const std::string& path, std::vector<Message>& out,
                       AnthropicBreakpoints& breakpoints) {
  DS_TRY(expect_object(raw, path));
  DS_ASSIGN_OR_RETURN(std::string role, required_string(raw, "role", path));
  if (role != "user" && role != "assistant")
    return field_error(join_path(path, "role"),
                       fmt::format("unknown role '{}' (expected user or assistant)", role));
  const Json* content = find_field(raw, "content");
  const std::string content_path = join_path(path, "content");
  if (content == nullptr) return field_error(content_path, "required");
  Message msg;
  msg.role = role == "user" ? Role::user : Role::assistant;
  msg.source_path = path;
  if (content->is_string()) {
    msg.content = content->get<std::string>();
    out.push_back(std::move(msg));
    return ok_status();
  }
  if (!content->is_array())
    return field_error(content_path,
                       fmt::format("expected string or array, got {}", json_type_name(*content)));
  bool has_text = false;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& block = (*content)[i];
    const std::string block_path = index_path(content_path, i);
    DS_TRY(expect_object(block, block_path));
    DS_ASSIGN_OR_RETURN(std::string type, required_string(block, "type", block_path));
    if (type == "thinking" || type == "redacted_thinking") {
      if (find_field(block, "cache_control") != nullptr)
        return field_error(join_path(block_path, "cache_control"),
                           "thinking blocks cannot be cached directly with cache_control");
    } else {
      DS_TRY(breakpoints.read(block, block_path, BreakpointSection::messages));
    }
    if (type == "text") {
      DS_ASSIGN_OR_RETURN(std::string text, required_string(block, "text", block_path));
      msg.content += text;
      has_text = true;
    } else if (type == "thinking" && msg.role == Role::assistant) {
      DS_ASSIGN_OR_RETURN(std::string thinking, required_string(block, "thinking", block_path));
      msg.reasoning_content += thinking;
    } else if (type == "redacted_thinking" && msg.role == Role::assistant) {
      continue;  // opaque to us; DeepSeek drops it too
    } else if (type == "tool_use" && msg.role == Role::assistant) {
      ToolCall call;
      DS_ASSIGN_OR_RETURN(call.id, required_string(block, "id", block_path));
      DS_ASSIGN_OR_RETURN(call.name, required_string(block, "name", block_path));
      DS_TRY(check_tool_name(call.name, join_path(block_path, "name")));
      const Json* input = find_field(block, "input");
      if (input == nullptr) {
        call.arguments_json = "{}";
      } else if (!input->is_object()) {
        return field_error(join_path(block_path, "input"),
                           fmt::format("expected object, got {}", json_type_name(*input)));
      } else {
        call.arguments_json = input->dump();
      }
      msg.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result" && msg.role == Role::user) {
      Message result;
      result.role = Role::tool;
      result.source_path = block_path;
      DS_ASSIGN_OR_RETURN(result.tool_call_id, required_string(block, "tool_use_id", block_path));
      if (const Json* c = find_field(block, "content"); c != nullptr) {
        DS_ASSIGN_OR_RETURN(result.content, text_of_blocks(*c, join_path(block_path, "content"), breakpoints,
                                                           BreakpointSection::messages));
      }
      out.push_back(std::move(result));
    } else if (type == "image" || type == "document") {
      return unsupported_error(join_path(block_path, "type"),
                               fmt::format("'{}' blocks are not supported", type));
    } else {
      return field_error(join_path(block_path, "type"),
                         fmt::format("'{}' is not a valid content block for role {}", type, role));
    }
  }
  // A user message of only tool results has no user text turn of its own.
  if (msg.role == Role::assistant || has_text) out.push_back(std::move(msg));
  return ok_status();
}

Result<Tool> convert_tool(const Json& raw, const std::string& path, const RequestLimits& limits,
                          AnthropicBreakpoints& breakpoints) {
  DS_TRY(expect_object(raw, path));
  DS_TRY(breakpoints.read(raw, path, BreakpointSection::tools));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(raw, "type", path));
  if (type.has_value() && *type != "custom")
    return unsupported_error(join_path(path, "type"),
                             fmt::format("server tool '{}' is not supported", *type));
  Tool tool;
  tool.source_path = path;
  DS_ASSIGN_OR_RETURN(tool.name, required_string(raw, "name", path));
  DS_TRY(check_tool_name(tool.name, join_path(path, "name")));
  DS_ASSIGN_OR_RETURN(tool.description, read_string(raw, "description", path));
  DS_ASSIGN_OR_RETURN(const Json* schema, read_object(raw, "input_schema", path));
  tool.parameters_json = schema->dump();
  DS_TRY(check_tool_schema_size(tool.parameters_json, join_path(path, "input_schema"), limits));
  // Anthropic's strict tool use: the input is decoded under input_schema (DSML encodings only).
  DS_ASSIGN_OR_RETURN(std::optional<bool> strict, read_bool(raw, "strict", path));
  tool.strict = strict.value_or(false);
  return tool;
}

Result<ToolChoice> convert_tool_choice(const Json& body, bool& parallel) {
  const Json* v = find_field(body, "tool_choice");
  if (v == nullptr) return ToolChoice{};
  DS_TRY(expect_object(*v, "tool_choice"));
  DS_ASSIGN_OR_RETURN(std::string type, required_string(*v, "type", "tool_choice"));
  DS_ASSIGN_OR_RETURN(std::optional<bool> disable_parallel,
                      read_bool(*v, "disable_parallel_tool_use", "tool_choice"));
  parallel = !disable_parallel.value_or(false);
  if (type == "auto") return ToolChoice{ToolChoiceKind::auto_choice, ""};
  if (type == "none") return ToolChoice{ToolChoiceKind::none, ""};
  if (type == "any") return ToolChoice{ToolChoiceKind::required, ""};
  if (type == "tool") {
    DS_ASSIGN_OR_RETURN(std::string name, required_string(*v, "name", "tool_choice"));
    return ToolChoice{ToolChoiceKind::named, name};
  }
  return field_error("tool_choice.type",
                     fmt::format("unknown value '{}' (expected auto, any, tool or none)", type));
}

// Anthropic's JSON outputs: `{"type":"json_schema","schema":{...}}` at `path` (output_config.format,
// or the beta's top-level output_format). The schema is always enforced, so it counts as strict.
Result<ResponseFormat> convert_output_format(const Json& v, const std::string& path) {
  DS_TRY(expect_object(v, path));
  DS_ASSIGN_OR_RETURN(std::string type, required_string(v, "type", path));
  if (type != "json_schema")
    return unsupported_error(join_path(path, "type"),
                             fmt::format("'{}' (only json_schema is supported)", type));
  ResponseFormat out;
  out.kind = ResponseFormatKind::json_schema;
  DS_ASSIGN_OR_RETURN(const Json* schema, read_object(v, "schema", path));
  out.schema_json = schema->dump();
  out.field = join_path(path, "schema");
  out.strict = true;
  return out;
}

// output_config.format (GA) or output_format (the structured-outputs beta); both is a 400.
Result<ResponseFormat> read_output_format(const Json& body, const Json* output_config) {
  const Json* ga = output_config != nullptr ? find_field(*output_config, "format") : nullptr;
  const Json* beta = find_field(body, "output_format");
  if (ga != nullptr && beta != nullptr)
    return field_error("output_format", "give output_config.format or output_format, not both");
  if (ga != nullptr && !ga->is_null()) return convert_output_format(*ga, "output_config.format");
  if (beta != nullptr && !beta->is_null()) return convert_output_format(*beta, "output_format");
  return ResponseFormat{};
}

}  // namespace

Result<ChatRequest> convert_anthropic_messages_request(const Json& body, const ConversionOptions& options) {
  if (!body.is_object()) return field_error("body", "expected object");
  ChatRequest req;
  req.api = ApiKind::anthropic_messages;
  AnthropicBreakpoints breakpoints;
  DS_ASSIGN_OR_RETURN(req.model, required_string(body, "model", ""));
  if (req.model.empty()) return field_error("model", "required");

  // max_tokens is required by the Messages API.
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, read_integer(body, "max_tokens", ""));
  if (!max_tokens.has_value()) return field_error("max_tokens", "required");
  DS_TRY(check_max_tokens(*max_tokens, "max_tokens", options.limits));
  req.sampling.max_tokens = max_tokens;

  if (const Json* system = find_field(body, "system"); system != nullptr) {
    Message sys;
    sys.role = Role::system;
    sys.source_path = "system";
    DS_ASSIGN_OR_RETURN(sys.content,
                        text_of_blocks(*system, "system", breakpoints, BreakpointSection::system));
    req.messages.push_back(std::move(sys));
  }
  DS_ASSIGN_OR_RETURN(const Json* messages, read_array(body, "messages", ""));
  if (messages->empty()) return field_error("messages", "must contain at least one message");
  for (size_t i = 0; i < messages->size(); ++i)
    DS_TRY(convert_message((*messages)[i], index_path("messages", i), req.messages, breakpoints));

  if (const Json* tools = find_field(body, "tools"); tools != nullptr) {
    if (!tools->is_array())
      return field_error("tools", fmt::format("expected array, got {}", json_type_name(*tools)));
    for (size_t i = 0; i < tools->size(); ++i) {
      DS_ASSIGN_OR_RETURN(Tool tool,
                          convert_tool((*tools)[i], index_path("tools", i), options.limits, breakpoints));
      req.tools.push_back(std::move(tool));
    }
  }
  DS_ASSIGN_OR_RETURN(req.tool_choice, convert_tool_choice(body, req.parallel_tool_calls));

  DS_ASSIGN_OR_RETURN(std::optional<bool> thinking_switch, read_thinking_switch(body, "thinking", req));
  std::optional<std::optional<ReasoningEffort>> effort;
  const Json* output_config = find_field(body, "output_config");
  if (output_config != nullptr) {
    DS_TRY(expect_object(*output_config, "output_config"));
    DS_ASSIGN_OR_RETURN(std::optional<std::string> effort_text,
                        read_string(*output_config, "effort", "output_config"));
    if (effort_text.has_value()) {
      DS_ASSIGN_OR_RETURN(effort, parse_reasoning_effort(*effort_text, "output_config.effort"));
    }
  }
  resolve_thinking(req, thinking_switch, effort, options);
  DS_ASSIGN_OR_RETURN(req.response_format, read_output_format(body, output_config));

  DS_ASSIGN_OR_RETURN(req.sampling.temperature, read_number(body, "temperature", ""));
  // Anthropic's temperature range is [0, 1].
  if (req.sampling.temperature) DS_TRY(check_range(*req.sampling.temperature, 0.0, 1.0, "temperature"));
  DS_ASSIGN_OR_RETURN(req.sampling.top_p, read_number(body, "top_p", ""));
  if (req.sampling.top_p) DS_TRY(check_range(*req.sampling.top_p, 0.0, 1.0, "top_p", /*lo_exclusive=*/true));
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, read_integer(body, "top_k", ""));
  if (top_k.has_value()) {
    if (*top_k < 1 || *top_k > INT32_MAX) return field_error("top_k", "must be a positive integer");
    req.sampling.top_k = static_cast<int32_t>(*top_k);
  }
  // Anthropic takes only an array here (OpenAI's `stop` also takes a bare string).
  if (const Json* stops = find_field(body, "stop_sequences"); stops != nullptr && !stops->is_array())
    return field_error("stop_sequences",
                       fmt::format("expected array of strings, got {}", json_type_name(*stops)));
  DS_ASSIGN_OR_RETURN(req.sampling.stop, read_stop_sequences(body, "stop_sequences", "", options.limits));
  DS_ASSIGN_OR_RETURN(std::optional<bool> stream, read_bool(body, "stream", ""));
  req.stream = stream.value_or(false);
  // Anthropic streams always report usage (message_start / message_delta).
  req.include_usage = req.stream;
  if (const Json* metadata = find_field(body, "metadata"); metadata != nullptr) {
    DS_TRY(expect_object(*metadata, "metadata"));
    DS_ASSIGN_OR_RETURN(std::optional<std::string> user_id, read_string(*metadata, "user_id", "metadata"));
    req.user = user_id.value_or("");
  }

  // The top-level breakpoint (automatic caching) takes one of the four slots.
  DS_TRY(breakpoints.read(body, "", BreakpointSection::top_level));
  DS_TRY(breakpoints.finish(req.cache));
  DS_TRY(read_cache_object(body, req.cache));

  DS_TRY(finalize_tools(req, "tool_choice", options.limits));
  DS_TRY(check_conversation(req, options));
  return req;
}

Result<ChatRequest> parse_anthropic_messages_request(std::string_view body,
                                                     const ConversionOptions& options) {
  DS_ASSIGN_OR_RETURN(Json json, parse_request_body(body));
  return convert_anthropic_messages_request(json, options);
}

}  // namespace ds::recipe
