// OpenAI Responses (POST /v1/responses) -> ChatRequest. DeepSeek's Responses API is stateless:
// previous_response_id, conversation, background and item references are rejected; `store` is
// ignored. input: a string (one user message) or items: messages (input_text / output_text parts),
// function_call, function_call_output, reasoning (summary/content text). instructions become the
// first system message; reasoning.effort and text.format map to thinking and response_format;
// web_search tools are ignored (deepseek-recipe's Responses default).
#pragma once

#include <string_view>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/conversion_options.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

Result<ChatRequest> parse_responses_request(std::string_view body, const ConversionOptions& options);
Result<ChatRequest> convert_responses_request(const Json& body, const ConversionOptions& options);

}  // namespace ds::recipe
