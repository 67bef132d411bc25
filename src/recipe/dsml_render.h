// The renderer V4 and V4.1 share (encoding_dsv4.py and V4.1's encoding.py differ only in the
// details a DsmlDialect names). encoding_v4.cpp and encoding_v41.cpp fill in the dialect.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/prompt.h"

namespace ds::recipe {

// Marker texts (added tokens of the V4/V4.1 tokenizer.json).
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

struct DsmlDialect {
  const char* encoding_name = "";
  std::string_view calls_tag;      // V4 "tool_calls", V4.1 " calls"
  std::string_view invoke_tag;     // V4 "invoke", V4.1 " invoke"
  std::string_view parameter_tag;  // V4 "parameter", V4.1 " parameter"
  // V4.1: <｜System｜> opens message 0 when it is a system message or an effort line is present,
  // and opens every later system message, which then counts as a user turn.
  bool system_marker = false;
  // Text put first in message 0 in thinking mode (V4: the Think Max paragraph for max effort,
  // V4.1: the numeric effort line). Empty: nothing.
  std::string effort_preamble;
  bool drop_earlier_reasoning = true;
};

Result<RenderedPrompt> render_dsml_prompt(const ChatRequest& request, const DsmlDialect& dialect);

// The DSML block of an assistant turn's tool calls, starting with its "\n\n" (exposed for tests and
// for the output parser's round-trip tests).
Status append_dsml_tool_calls(PromptBuilder& out, const std::vector<ToolCall>& calls,
                              const DsmlDialect& dialect);

}  // namespace ds::recipe
