// Checks shared by the chat APIs. Field readers run per API (their field names differ); the
// conversation-level rules below run on the converted ChatRequest and name fields through each
// message's source_path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/conversion_options.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

// The effort strings the APIs accept. nullopt means "none" (thinking off). Aliases follow DeepSeek:
// minimal->low, medium->high, ultra->max; xhigh stays xhigh (V4.1 renders it as its own level).
Result<std::optional<ReasoningEffort>> parse_reasoning_effort(std::string_view text, std::string_view path);

// Thinking resolution shared by the APIs: an explicit switch wins; otherwise an effort of "none"
// turns thinking off and any other effort turns it on; otherwise options.default_thinking.
// `effort` is absent when the request has no effort field, nullopt inside when it said "none".
void resolve_thinking(ChatRequest& request, std::optional<bool> thinking_switch,
                      std::optional<std::optional<ReasoningEffort>> effort, const ConversionOptions& options);

// {"type": "enabled" | "adaptive" | "disabled", "budget_tokens"?: int} as OpenAI-style DeepSeek
// and Anthropic send it. Absent: nullopt. budget_tokens (when given) goes to request.
Result<std::optional<bool>> read_thinking_switch(const Json& body, std::string_view key,
                                                 ChatRequest& request);

// `stop` as a string or an array of strings, within the limits (count, non-empty, byte length).
Result<std::vector<std::string>> read_stop_sequences(const Json& obj, std::string_view key,
                                                     std::string_view path, const RequestLimits& limits);

// value in [lo, hi] (or (lo, hi] when lo_exclusive), else "PATH: must be in [lo, hi]".
Status check_range(double value, double lo, double hi, std::string_view path, bool lo_exclusive = false);
Status check_max_tokens(int64_t max_tokens, std::string_view path, const RequestLimits& limits);

// Function names go inside name="..." attributes of the prompt: ^[A-Za-z0-9_.:-]{1,64}$.
Status check_tool_name(std::string_view name, std::string_view path);

// A tool's parameter schema (compact JSON text) within RequestLimits::max_tool_schema_bytes;
// `path` names the schema field of this API.
Status check_tool_schema_size(std::string_view schema_json, std::string_view path,
                              const RequestLimits& limits);

// Tools and tool_choice together: count limit, unique names, a named choice must exist (then only
// that tool is kept and the call becomes required), and a forced call cannot be combined with
// thinking (DeepSeek answers 400). `tool_choice_path` names the choice field of this API.
Status finalize_tools(ChatRequest& request, std::string_view tool_choice_path, const RequestLimits& limits);

enum class OpenAiApi { chat_completions, completions };
// The OpenAI sampling fields at the top level of `body`: temperature [0, 2], top_p (0, 1],
// presence/frequency_penalty [-2, 2], max_tokens (Chat also max_completion_tokens, which wins),
// stop, seed, n (only 1), logprobs/top_logprobs (Completions: integer logprobs).
Status read_openai_sampling(const Json& body, const RequestLimits& limits, OpenAiApi api, SamplingFields& s);

// Conversation rules: at least one message and not too many; an assistant message with tool_calls is
// followed by exactly one tool message per call id (in any order); every tool message answers such
// a call; `prefix` only on a final assistant message; json_object needs the word "json" somewhere in
// the system/user text when the options ask for DeepSeek's rule.
// `paths` names the API's own fields in errors about the whole list or the response format.
struct ConversationPaths {
  std::string_view messages = "messages";
  std::string_view response_format = "response_format";
};
Status check_conversation(const ChatRequest& request, const ConversionOptions& options,
                          const ConversationPaths& paths = {});

}  // namespace ds::recipe
