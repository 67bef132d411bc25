// Knobs for request conversion: defaults the client did not set and the limits a request must fit.
// The server builds one per served model (for V3, default_thinking = false: V3 has no thinking mode).
#pragma once

#include <cstddef>
#include <cstdint>

#include "recipe/chat_types.h"

namespace ds::recipe {

struct RequestLimits {
  size_t max_messages = 2048;
  size_t max_tools = 128;
  // One tool's parameter schema as compact JSON. It is rendered into every prompt, so it bounds
  // prompt size; real agent schemas (MCP servers) stay well under it.
  size_t max_tool_schema_bytes = 128u << 10;
  size_t max_stop_sequences = 16;  // DeepSeek's limit
  size_t max_stop_bytes = 256;     // per stop sequence
  size_t max_tool_calls_per_message = 128;
  int64_t max_tokens_cap = 393216;        // 384K: the V4 card's recommended context for Think Max
  size_t max_prompt_token_ids = 1 << 20;  // Completions with token-id prompts
  int32_t max_choices = 8;                // `n` of Chat Completions and Completions
};

struct ConversionOptions {
  bool default_thinking = true;  // DeepSeek's API: thinking on unless the request turns it off
  ReasoningEffort default_effort = ReasoningEffort::high;
  // DeepSeek answers 400 when response_format is json_object and no system/user text says "json".
  bool require_json_word_for_json_object = true;
  RequestLimits limits;
};

}  // namespace ds::recipe
