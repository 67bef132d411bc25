// DeepSeek-V3 prompt encoding: the chat_template of V3's tokenizer_config.json (the model spec has
// no V3 chat section). BOS, all system texts joined by "\n\n", then <｜User｜>/<｜Assistant｜> turns
// each assistant turn closed by end-of-sentence; tool calls and outputs in V3's own markers.
// V3 has no thinking mode and no tool-definition format (its template ignores `tools`).
#include <fmt/format.h>

#include "recipe/dsml_render.h"
#include "recipe/encoding.h"
#include "recipe/request_error.h"

namespace ds::recipe {

namespace {
constexpr std::string_view kToolCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kToolCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kToolCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kToolCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kToolSep = "<｜tool▁sep｜>";
constexpr std::string_view kToolOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kToolOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kToolOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kToolOutputEnd = "<｜tool▁output▁end｜>";
}  // namespace

Result<RenderedPrompt> render_prompt_v3(const ChatRequest& request, const EncodingOptions& /*options*/) {
  if (request.thinking && request.thinking_explicit)
    return unsupported_error("thinking", "the deepseek_v3 encoding has no thinking mode");
  if (!request.tools.empty() && request.tool_choice.kind != ToolChoiceKind::none)
    return unsupported_error(
        "tools",
        "the deepseek_v3 encoding has no tool-definition format; describe tools in the system "
        "message (tool_calls and tool results in the history are rendered)");
  PromptBuilder out;
  out.marker(kBos);
  std::string system_text;
  bool first_system = true;
  for (const Message& m : request.messages) {
    if (m.role != Role::system) continue;
    if (!first_system) system_text += "\n\n";
    system_text += m.content;
    first_system = false;
  }
  out.text(system_text);

  const std::vector<Message>& msgs = request.messages;
  bool after_tool_outputs = false;  // V3 continues right after <｜tool▁outputs▁end｜>, no header
  Role last_role = Role::system;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    switch (m.role) {
      case Role::system:
        continue;
      case Role::latest_reminder:
        return unsupported_error(m.source_path, "the deepseek_v3 encoding has no latest_reminder role");
      case Role::user:
      case Role::developer:
        out.marker(kUser);
        out.text(m.content);
        after_tool_outputs = false;
        break;
      case Role::assistant:
        if (!after_tool_outputs) out.marker(kAssistant);
        after_tool_outputs = false;
        out.text(m.content);
        if (!m.tool_calls.empty()) {
          out.marker(kToolCallsBegin);
          for (size_t k = 0; k < m.tool_calls.size(); ++k) {
            if (k > 0) out.text("\n");
            out.marker(kToolCallBegin);
            out.text("function");
            out.marker(kToolSep);
            out.text(
                fmt::format("{}\n```json\n{}\n```", m.tool_calls[k].name,
                            m.tool_calls[k].arguments_json.empty() ? "{}" : m.tool_calls[k].arguments_json));
            out.marker(kToolCallEnd);
          }
          out.marker(kToolCallsEnd);
        }
        if (!m.prefix) out.marker(kEos);
        break;
      case Role::tool: {
        const bool first_in_run = i == 0 || msgs[i - 1].role != Role::tool;
        if (first_in_run) {
          out.marker(kToolOutputsBegin);
        } else {
          out.text("\n");
        }
        out.marker(kToolOutputBegin);
        out.text(m.content);
        out.marker(kToolOutputEnd);
        if (i + 1 == msgs.size() || msgs[i + 1].role != Role::tool) {
          out.marker(kToolOutputsEnd);
          after_tool_outputs = true;
        }
        break;
      }
    }
    last_role = m.role;
  }
  const bool continuing = !msgs.empty() && msgs.back().prefix;
  if (!continuing && last_role != Role::tool) out.marker(kAssistant);

  RenderedPrompt rendered;
  rendered.encoding_name = "deepseek_v3";
  rendered.segments = out.take();
  return rendered;
}

}  // namespace ds::recipe
