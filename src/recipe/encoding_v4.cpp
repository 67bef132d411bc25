// DeepSeek-V4 prompt encoding (encoding_dsv4.py; model spec §7 "V4 rendering").
#include "recipe/dsml_render.h"
#include "recipe/encoding.h"

namespace ds::recipe {

namespace {

// V4 has one effort paragraph, for max only ("Think Max"); other levels add nothing.
const char* const kThinkMaxParagraph =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the "
    "root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

}  // namespace

Result<RenderedPrompt> render_prompt_v4(const ChatRequest& request, const EncodingOptions& options) {
  DsmlDialect d;
  d.encoding_name = "deepseek_v4";
  d.calls_tag = "tool_calls";
  d.invoke_tag = "invoke";
  d.parameter_tag = "parameter";
  d.system_marker = false;
  d.effort_preamble = request.reasoning_effort == ReasoningEffort::max ? kThinkMaxParagraph : "";
  d.drop_earlier_reasoning = options.drop_earlier_reasoning.value_or(true);
  return render_dsml_prompt(request, d);
}

}  // namespace ds::recipe
