// OpenAI Chat Completions (POST /v1/chat/completions) -> ChatRequest, with DeepSeek's rules
// (features spec §10.3). Unknown fields are ignored, as OpenAI-compatible servers do; fields that
// would silently change the answer if ignored (logit_bias, audio, legacy functions, ...) are
// rejected as unsupported. See docs/recipe.md for the full table.
#pragma once

#include <string_view>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/conversion_options.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

Result<ChatRequest> parse_chat_completions_request(std::string_view body, const ConversionOptions& options);
Result<ChatRequest> convert_chat_completions_request(const Json& body, const ConversionOptions& options);

// OpenAI message content: a string, or an array of {"type":"text","text":...} parts (concatenated).
// Images, audio and files are unsupported. Null/absent gives "" (callers decide whether that is ok).
Result<std::string> read_openai_text_content(const Json& message, std::string_view key,
                                             std::string_view path);

}  // namespace ds::recipe
