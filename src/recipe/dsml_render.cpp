#include "recipe/dsml_render.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "recipe/json_fields.h"
#include "recipe/request_error.h"

namespace ds::recipe {

namespace {

// One rendered turn after normalization. User turns carry blocks (text and tool results), the
// other roles plain content.
struct Block {
  bool is_tool_result = false;
  std::string text;
  std::string tool_call_id;
};

struct Turn {
  Role role = Role::user;
  std::string content;
  std::vector<Block> blocks;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  bool prefix = false;
  bool carries_tools = false;  // the system turn that holds the tools section / response format
};

const std::string kToolsTemplate =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<{D}{C}>\" block like the following:\n\n"
    "<{D}{C}>\n"
    "<{D}{I} name=\"$TOOL_NAME\">\n"
    "<{D}{P} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}{P}>\n"
    "...\n"
    "</{D}{I}>\n"
    "<{D}{I} name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</{D}{I}>\n"
    "</{D}{C}>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
    "{S}\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

std::vector<std::string_view> template_markers() { return {kDsml, kThinkStart, kThinkEnd}; }

Result<std::string> tool_schema_line(const Tool& tool) {
  Json fn = Json::object();
  fn["name"] = tool.name;
  if (tool.description.has_value()) fn["description"] = *tool.description;
  if (!tool.parameters_json.empty()) {
    DS_ASSIGN_OR_RETURN(
        fn["parameters"],
        parse_embedded_json(tool.parameters_json, join_path(tool.source_path, "function.parameters")));
  }
  return python_json_dumps(fn);
}

Status append_tools_section(PromptBuilder& out, const std::vector<Tool>& tools, const DsmlDialect& d) {
  std::string schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    DS_ASSIGN_OR_RETURN(std::string line, tool_schema_line(tools[i]));
    if (i > 0) schemas += '\n';
    schemas += line;
  }
  // Tags and think markers of the template become markers; the schemas are client text.
  const size_t at = kToolsTemplate.find("{S}");
  const auto fill = [&](std::string_view part) {
    std::string s(part);
    for (const auto& [key, value] : {std::pair<std::string_view, std::string_view>{"{D}", kDsml},
                                     {"{C}", d.calls_tag},
                                     {"{I}", d.invoke_tag},
                                     {"{P}", d.parameter_tag}}) {
      for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p + value.size()))
        s.replace(p, key.size(), value);
    }
    return s;
  };
  out.template_text(fill(std::string_view(kToolsTemplate).substr(0, at)), template_markers());
  out.text(schemas);
  out.template_text(fill(std::string_view(kToolsTemplate).substr(at + 3)), template_markers());
  return ok_status();
}

Result<std::string> response_format_json(const ResponseFormat& rf) {
  Json j = Json::object();
  if (rf.kind == ResponseFormatKind::json_object) {
    j["type"] = "json_object";
  } else {
    j["type"] = "json_schema";
    Json inner = Json::object();
    inner["name"] = rf.schema_name;
    DS_ASSIGN_OR_RETURN(inner["schema"],
                        parse_embedded_json(rf.schema_json, "response_format.json_schema.schema"));
    inner["strict"] = rf.strict;
    j["json_schema"] = std::move(inner);
  }
  return python_json_dumps(j);
}

void open_tag(PromptBuilder& out, std::string_view tag, std::string_view attrs = "") {
  out.text("<");
  out.marker(kDsml);
  out.text(tag);
  out.text(attrs);
  out.text(">");
}

void close_tag(PromptBuilder& out, std::string_view tag) {
  out.text("</");
  out.marker(kDsml);
  out.text(tag);
  out.text(">");
}

// Messages -> turns: tool results and user text that follow each other merge into one user turn
// (blocks joined by "\n\n"), consecutive assistant messages merge into one turn, and tool results
// are put in the order of the preceding assistant's calls (encoding_dsv4.py preprocessing).
std::vector<Turn> build_turns(const ChatRequest& request, const DsmlDialect& d) {
  std::vector<Turn> turns;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const Message& m = request.messages[i];
    if (m.role == Role::tool || m.role == Role::user) {
      Block b{m.role == Role::tool, m.content, m.tool_call_id};
      if (!turns.empty() && turns.back().role == Role::user) {
        turns.back().blocks.push_back(std::move(b));
      } else {
        Turn t;
        t.role = Role::user;
        t.blocks.push_back(std::move(b));
        turns.push_back(std::move(t));
      }
      continue;
    }
    if (m.role == Role::assistant && !turns.empty() && turns.back().role == Role::assistant) {
      Turn& prev = turns.back();
      if (!m.content.empty())
        prev.content = prev.content.empty() ? m.content : prev.content + "\n\n" + m.content;
      if (!m.reasoning_content.empty())
        prev.reasoning =
            prev.reasoning.empty() ? m.reasoning_content : prev.reasoning + "\n\n" + m.reasoning_content;
      prev.tool_calls.insert(prev.tool_calls.end(), m.tool_calls.begin(), m.tool_calls.end());
      prev.prefix = m.prefix;
      continue;
    }
    if (m.role == Role::system && !d.system_marker && !turns.empty()) {
      // V4 has no marker for a later system message: it joins the first system text.
      if (turns.front().role == Role::system) {
        turns.front().content += "\n\n" + m.content;
      } else {
        Turn t;
        t.role = Role::system;
        t.content = m.content;
        turns.insert(turns.begin(), std::move(t));
      }
      continue;
    }
    Turn t;
    t.role = m.role;
    t.content = m.content;
    t.reasoning = m.reasoning_content;
    t.tool_calls = m.tool_calls;
    t.prefix = m.prefix;
    turns.push_back(std::move(t));
  }
  // Tool results in the order of the calls of the assistant turn before them.
  std::map<std::string, size_t, std::less<>> call_order;
  for (Turn& t : turns) {
    if (t.role == Role::assistant && !t.tool_calls.empty()) {
      call_order.clear();
      for (size_t k = 0; k < t.tool_calls.size(); ++k) call_order.emplace(t.tool_calls[k].id, k);
    } else if (t.role == Role::user && !call_order.empty()) {
      std::vector<Block> results;
      for (const Block& b : t.blocks)
        if (b.is_tool_result) results.push_back(b);
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) {
        auto ia = call_order.find(a.tool_call_id), ib = call_order.find(b.tool_call_id);
        return (ia == call_order.end() ? 0 : ia->second) < (ib == call_order.end() ? 0 : ib->second);
      });
      size_t next = 0;
      for (Block& b : t.blocks)
        if (b.is_tool_result) b = results[next++];
    }
  }
  // The tools section and the response format live in the first system turn (created if absent).
  const bool with_tools = !request.tools.empty() && request.tool_choice.kind != ToolChoiceKind::none;
  if (with_tools || request.response_format.kind != ResponseFormatKind::text) {
    if (turns.empty() || turns.front().role != Role::system) {
      Turn t;
      t.role = Role::system;
      turns.insert(turns.begin(), std::move(t));
    }
    turns.front().carries_tools = true;
  }
  return turns;
}

bool opens_like_user(const std::vector<Turn>& turns, size_t i, const DsmlDialect& d) {
  const Role r = turns[i].role;
  return r == Role::user || r == Role::developer || (d.system_marker && r == Role::system && i > 0);
}

// -1 when there is none.
long last_user_index(const std::vector<Turn>& turns, const DsmlDialect& d) {
  for (size_t i = turns.size(); i-- > 0;)
    if (opens_like_user(turns, i, d)) return static_cast<long>(i);
  return -1;
}

}  // namespace

Status append_dsml_tool_calls(PromptBuilder& out, const std::vector<ToolCall>& calls, const DsmlDialect& d) {
  out.text("\n\n");
  open_tag(out, d.calls_tag);
  out.text("\n");
  for (size_t k = 0; k < calls.size(); ++k) {
    const ToolCall& call = calls[k];
    if (k > 0) out.text("\n");
    open_tag(out, d.invoke_tag, fmt::format(" name=\"{}\"", call.name));
    out.text("\n");
    Json args = Json::object();
    if (!call.arguments_json.empty()) {
      DS_ASSIGN_OR_RETURN(args, parse_embedded_json(call.arguments_json, "tool_calls.arguments"));
    }
    if (!args.is_object()) return field_error("tool_calls.arguments", "must be a JSON object");
    bool first = true;
    for (const auto& [key, value] : args.items()) {
      if (!first) out.text("\n");
      first = false;
      const bool is_string = value.is_string();
      open_tag(out, d.parameter_tag,
               fmt::format(" name=\"{}\" string=\"{}\"", key, is_string ? "true" : "false"));
      out.text(is_string ? value.get_ref<const std::string&>() : python_json_dumps(value));
      close_tag(out, d.parameter_tag);
    }
    out.text("\n");
    close_tag(out, d.invoke_tag);
  }
  out.text("\n");
  close_tag(out, d.calls_tag);
  return ok_status();
}

Result<RenderedPrompt> render_dsml_prompt(const ChatRequest& request, const DsmlDialect& d) {
  std::vector<Turn> turns = build_turns(request, d);
  if (turns.empty()) return field_error("messages", "must contain at least one message");
  const bool thinking = request.thinking;
  const bool with_tools = !request.tools.empty() && request.tool_choice.kind != ToolChoiceKind::none;
  // Tools in the prompt keep all reasoning: tool loops need the reasoning that led to each call.
  const bool drop = thinking && d.drop_earlier_reasoning && !with_tools;
  if (drop) {
    const long last_user = last_user_index(turns, d);
    std::vector<Turn> kept;
    for (size_t i = 0; i < turns.size(); ++i) {
      const bool before = static_cast<long>(i) < last_user;
      if (before && turns[i].role == Role::developer) continue;
      if (before && turns[i].role == Role::assistant) turns[i].reasoning.clear();
      kept.push_back(std::move(turns[i]));
    }
    turns = std::move(kept);
  }
  const long last_user = last_user_index(turns, d);

  PromptBuilder out;
  RenderedPrompt rendered;
  rendered.encoding_name = d.encoding_name;
  rendered.dsml_calls_tag = d.calls_tag;
  rendered.dsml_invoke_tag = d.invoke_tag;
  rendered.dsml_parameter_tag = d.parameter_tag;
  bool open_reasoning = false;  // the last thing emitted is an open <think>
  out.marker(kBos);
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    const bool is_last = i + 1 == turns.size();
    const std::string preamble = (i == 0 && thinking) ? d.effort_preamble : std::string();
    if (i == 0 && d.system_marker && (!preamble.empty() || t.role == Role::system)) out.marker(kSystem);
    out.text(preamble);
    switch (t.role) {
      case Role::system:
        if (i > 0 && d.system_marker) out.marker(kSystem);
        out.text(t.content);
        if (t.carries_tools && with_tools) {
          out.text("\n\n");
          DS_TRY(append_tools_section(out, request.tools, d));
        }
        if (t.carries_tools && request.response_format.kind != ResponseFormatKind::text) {
          DS_ASSIGN_OR_RETURN(std::string schema, response_format_json(request.response_format));
          out.text("\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n");
          out.text(schema);
        }
        break;
      case Role::developer:
        out.marker(kUser);
        out.text(t.content);
        break;
      case Role::user:
        out.marker(kUser);
        for (size_t b = 0; b < t.blocks.size(); ++b) {
          if (b > 0) out.text("\n\n");
          if (t.blocks[b].is_tool_result) out.text("<tool_result>");
          out.text(t.blocks[b].text);
          if (t.blocks[b].is_tool_result) out.text("</tool_result>");
        }
        break;
      case Role::latest_reminder:
        out.marker(kLatestReminder);
        out.text(t.content);
        break;
      case Role::assistant: {
        open_reasoning = false;
        if (thinking && (!drop || static_cast<long>(i) > last_user)) {
          out.text(t.reasoning);
          // A prefix that is still reasoning continues inside the open <think>.
          const bool reasoning_continues =
              t.prefix && !t.reasoning.empty() && t.content.empty() && t.tool_calls.empty();
          if (reasoning_continues) {
            open_reasoning = true;
          } else {
            out.marker(kThinkEnd);
          }
        }
        out.text(t.content);
        if (!t.tool_calls.empty()) DS_TRY(append_dsml_tool_calls(out, t.tool_calls, d));
        if (!t.prefix) out.marker(kEos);
        break;
      }
      case Role::tool:
        return Status(ErrorCode::internal, "tool messages are merged into user turns before rendering");
    }
    if (!is_last && turns[i + 1].role != Role::assistant && turns[i + 1].role != Role::latest_reminder)
      continue;
    if (t.prefix) continue;
    // The assistant header: after user-like turns, after a system turn that ends the prompt or
    // precedes an assistant turn, and after a final assistant turn (a new reply follows it).
    const bool header = opens_like_user(turns, i, d) ||
                        (t.role == Role::system && (is_last || !d.system_marker)) ||
                        (is_last && t.role == Role::assistant);
    if (!header) continue;
    out.marker(kAssistant);
    if (thinking && (!drop || static_cast<long>(i) >= last_user)) {
      out.marker(kThinkStart);
      open_reasoning = true;
    } else {
      out.marker(kThinkEnd);
      open_reasoning = false;
    }
  }
  const bool forced_tool = request.tool_choice.kind == ToolChoiceKind::required ||
                           request.tool_choice.kind == ToolChoiceKind::named;
  const bool continuing = !request.messages.empty() && request.messages.back().prefix;
  if (forced_tool && !continuing) {
    out.text("\n\n");
    open_tag(out, d.calls_tag);
    out.text("\n");
    rendered.generation_in_tool_calls = true;
  }
  rendered.generation_in_reasoning = open_reasoning && !rendered.generation_in_tool_calls;
  rendered.segments = out.take();
  return rendered;
}

}  // namespace ds::recipe
