#include "recipe/encoding.h"

#include <fmt/format.h>

#include "recipe/request_error.h"

namespace ds::recipe {

const char* prompt_encoding_name(PromptEncodingKind kind) {
  switch (kind) {
    case PromptEncodingKind::deepseek_v3:
      return "deepseek_v3";
    case PromptEncodingKind::deepseek_v4:
      return "deepseek_v4";
    case PromptEncodingKind::deepseek_v41:
      return "deepseek_v41";
  }
  return "unknown";
}

Result<PromptEncodingKind> prompt_encoding_for_model_type(std::string_view model_type) {
  if (model_type == "deepseek_v3" || model_type == "deepseek_v32") return PromptEncodingKind::deepseek_v3;
  if (model_type == "deepseek_v4") return PromptEncodingKind::deepseek_v4;
  if (model_type == "deepseek_v41") return PromptEncodingKind::deepseek_v41;
  return unsupported_error("model_type", fmt::format("no prompt encoding for model_type '{}'", model_type));
}

Result<RenderedPrompt> render_prompt(const ChatRequest& request, const EncodingOptions& options) {
  switch (options.kind) {
    case PromptEncodingKind::deepseek_v3:
      return render_prompt_v3(request, options);
    case PromptEncodingKind::deepseek_v4:
      return render_prompt_v4(request, options);
    case PromptEncodingKind::deepseek_v41:
      return render_prompt_v41(request, options);
  }
  return Status(ErrorCode::internal, "unknown prompt encoding kind");
}

}  // namespace ds::recipe
