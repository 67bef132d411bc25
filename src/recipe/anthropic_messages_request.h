// Anthropic Messages (POST /v1/messages, DeepSeek's /anthropic endpoint) -> ChatRequest.
// system string or text blocks; content blocks text / tool_use / tool_result / thinking
// (redacted_thinking is skipped); max_tokens required; stop_sequences; thinking {type,
// budget_tokens}; output_config.effort; tools with input_schema; tool_choice auto/any/tool/none.
// top_k, container, mcp_servers and service_tier are accepted and ignored, as DeepSeek does.
#pragma once

#include <string_view>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/conversion_options.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

Result<ChatRequest> parse_anthropic_messages_request(std::string_view body, const ConversionOptions& options);
Result<ChatRequest> convert_anthropic_messages_request(const Json& body, const ConversionOptions& options);

}  // namespace ds::recipe
