// DeepSeek-V4.1 prompt encoding (V4.1 encoding/encoding.py; features spec §10.2): V4's layout plus
// <｜System｜>, a numeric effort line and DSML tag names with a leading space.
#include <fmt/format.h>

#include "recipe/dsml_render.h"
#include "recipe/encoding.h"

namespace ds::recipe {

Result<RenderedPrompt> render_prompt_v41(const ChatRequest& request, const EncodingOptions& options) {
  DsmlDialect d;
  d.encoding_name = "deepseek_v41";
  d.calls_tag = " calls";
  d.invoke_tag = " invoke";
  d.parameter_tag = " parameter";
  d.system_marker = true;
  const int effort = options.v41_effort_values[static_cast<size_t>(request.reasoning_effort)];
  d.effort_preamble = fmt::format(
      "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
      effort);
  d.drop_earlier_reasoning = options.drop_earlier_reasoning.value_or(false);
  return render_dsml_prompt(request, d);
}

}  // namespace ds::recipe
