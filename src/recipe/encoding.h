// Prompt encodings: a ChatRequest rendered as DeepSeek V3, V4 or V4.1 expects it
// (model spec §7/§8, features spec §10.2). Pick one by config.json model_type, render, tokenize:
//
//   DS_ASSIGN_OR_RETURN(PromptEncodingKind kind, prompt_encoding_for_model_type(config.model_type));
//   DS_ASSIGN_OR_RETURN(RenderedPrompt prompt, render_prompt(request, EncodingOptions{.kind = kind}));
//   DS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenize_prompt(prompt, tokenizer));
//
// Rendering is pure (no tokenizer): golden tests compare RenderedPrompt::text().
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/prompt.h"

namespace ds::recipe {

enum class PromptEncodingKind { deepseek_v3, deepseek_v4, deepseek_v41 };
const char* prompt_encoding_name(PromptEncodingKind kind);

// deepseek_v3 / deepseek_v32 -> V3, deepseek_v4 -> V4, deepseek_v41 -> V4.1; others are an error.
Result<PromptEncodingKind> prompt_encoding_for_model_type(std::string_view model_type);

struct EncodingOptions {
  PromptEncodingKind kind = PromptEncodingKind::deepseek_v41;
  // In thinking mode without tools, drop the reasoning of assistant turns before the last user
  // message (and developer messages there). Unset: V4 drops (encoding_dsv4.py), V4.1 keeps
  // (deepseek-recipe, features spec §10.2 rule 5; the V4.1 encoding.py default would drop).
  std::optional<bool> drop_earlier_reasoning;
  // V4.1's numeric "Reasoning Effort: N" for low, high, xhigh, max (V4.1 encoding.py; the
  // features spec quotes 50/75/100 from deepseek-recipe for low/high/max instead).
  std::array<int, 4> v41_effort_values = {25, 50, 75, 100};
};

Result<RenderedPrompt> render_prompt(const ChatRequest& request, const EncodingOptions& options);

Result<RenderedPrompt> render_prompt_v3(const ChatRequest& request, const EncodingOptions& options);
Result<RenderedPrompt> render_prompt_v4(const ChatRequest& request, const EncodingOptions& options);
Result<RenderedPrompt> render_prompt_v41(const ChatRequest& request, const EncodingOptions& options);

}  // namespace ds::recipe
