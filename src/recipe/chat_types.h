// Engine-agnostic chat request: what the four HTTP APIs (OpenAI Chat Completions, OpenAI Responses,
// Anthropic Messages; OpenAI Completions has its own CompletionRequest) are converted into before a
// prompt encoding renders it. The server maps it to an engine request; nothing here knows the engine.
//
// Every string is UTF-8 as received. JSON-valued fields (tool parameters, tool-call arguments,
// response schemas) are kept as JSON text with the client's key order, because the prompt encodings
// serialize them back and key order changes the prompt (and therefore the prefix cache).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::recipe {

enum class Role {
  system,
  user,
  assistant,
  tool,
  developer,        // OpenAI's newer name for system-like instructions; V4 renders it as a user turn
  latest_reminder,  // DeepSeek-specific: text the model sees right after the assistant header
};
const char* role_name(Role role);

struct ToolCall {
  std::string id;              // client-chosen call id; tool results refer to it
  std::string name;            // function name
  std::string arguments_json;  // JSON object text as sent ("" means {})
};

struct Message {
  Role role = Role::user;
  std::string content;               // text parts concatenated; "" when absent or null
  std::string reasoning_content;     // assistant only: the thinking text of that turn
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only: which call this result answers
  std::string name;                  // optional participant / tool name
  // assistant only, last message only: the reply continues this text (DeepSeek "chat prefix
  // completion"); rendered without end-of-sentence and without a new generation header.
  bool prefix = false;
  // Where the message came from in the request body ("messages[3]", "input[2]"), so checks that run
  // after conversion can still name the offending field.
  std::string source_path;
};

struct Tool {
  std::string name;
  std::optional<std::string> description;
  std::string parameters_json;  // JSON Schema object text; "" when the client gave none
  std::string source_path;      // "tools[1]"
  // OpenAI `strict: true`: the call's arguments are constrained to parameters_json while decoding
  // (DSML encodings; server/tool_call_constraint.h, docs/grammar.md).
  bool strict = false;
};

enum class ToolChoiceKind { auto_choice, none, required, named };
struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::auto_choice;
  std::string name;  // kind == named
};

// DeepSeek's effort levels after the API aliases are folded (minimal->low, medium->high, ultra->max).
enum class ReasoningEffort { low, high, xhigh, max };
const char* reasoning_effort_name(ReasoningEffort effort);

// The output constraint, enforced while decoding by the engine's grammar (docs/grammar.md): OpenAI's
// response_format / text.format, or vLLM's / SGLang's fields (structured_output_fields.h).
enum class ResponseFormatKind { text, json_object, json_schema, regex, grammar, choice };
struct ResponseFormat {
  ResponseFormatKind kind = ResponseFormatKind::text;
  std::string schema_name;           // json_schema only
  std::string schema_json;           // json_schema only: the JSON Schema object text
  bool strict = false;               // json_schema only; the schema is enforced either way (never loosened)
  std::string pattern;               // regex: the pattern; grammar: the GBNF text
  std::vector<std::string> choices;  // choice: the output is exactly one of them
  // The request field the constraint came from ("response_format.json_schema.schema",
  // "structured_outputs.regex", "guided_json", ...): compile errors name it as the 400's param.
  std::string field;
};

// Sampling fields as the client sent them (validated for range, not applied). Absent means "engine
// default", which is why most are optional.
struct SamplingFields {
  std::optional<double> temperature;  // [0, 2]
  std::optional<double> top_p;        // (0, 1]
  std::optional<int32_t> top_k;       // Anthropic only; DeepSeek ignores it
  std::optional<int64_t> max_tokens;  // >= 1, <= RequestLimits::max_tokens_cap
  std::vector<std::string> stop;      // stop sequences, matched in content only
  std::optional<int64_t> seed;
  double presence_penalty = 0.0;   // [-2, 2]
  double frequency_penalty = 0.0;  // [-2, 2]
  bool logprobs = false;
  std::optional<int32_t> top_logprobs;  // [0, 20], needs logprobs
  int32_t n = 1;                        // choices: [1, RequestLimits::max_choices]
};

// Prompt-cache directives of a request, whatever API field carried them (recipe/cache_fields.h;
// docs/kvcache.md, Cache control in the APIs). The server maps them onto the engine's Request.
struct CacheDirectives {
  std::string cache_class;       // our cache.class: the KV tier traffic class ("" = the default)
  std::optional<int64_t> ttl_s;  // tier TTL: cache.ttl_s, else Anthropic's longest ttl, else 24h retention
  bool pin = false;              // our cache.pin: keep the prompt's blocks in the pool for the TTL
  std::string salt;              // our cache.salt: requests with different salts never share KV
  std::string prompt_cache_key;  // OpenAI prompt_cache_key: a grouping key (admin deletion by prefix)
  bool pool_only = false;        // OpenAI prompt_cache_retention "in-memory": never written to the tiers
  int32_t n_breakpoints = 0;     // Anthropic cache_control blocks (top level included)
  // Anthropic reports cache_creation_input_tokens only for requests that asked for caching.
  bool any() const {
    return !cache_class.empty() || ttl_s.has_value() || pin || !salt.empty() || !prompt_cache_key.empty() ||
           pool_only || n_breakpoints > 0;
  }
};

enum class ApiKind { chat_completions, completions, responses, anthropic_messages };
const char* api_kind_name(ApiKind api);

struct ChatRequest {
  ApiKind api = ApiKind::chat_completions;
  std::string model;
  std::vector<Message> messages;
  std::vector<Tool> tools;  // after tool_choice filtering (a named choice keeps only that tool)
  ToolChoice tool_choice;
  bool thinking = true;            // resolved: explicit switch, else effort "none", else the default
  bool thinking_explicit = false;  // the client asked for thinking on or off itself
  ReasoningEffort reasoning_effort = ReasoningEffort::high;
  std::optional<int64_t> thinking_budget_tokens;  // Anthropic thinking.budget_tokens (not enforced)
  ResponseFormat response_format;
  SamplingFields sampling;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;            // end-user id (OpenAI user, Anthropic metadata.user_id)
  bool parallel_tool_calls = true;
  CacheDirectives cache;
};

// OpenAI Completions (legacy): a raw prompt, no chat template.
struct CompletionRequest {
  std::string model;
  std::optional<std::string> prompt_text;  // exactly one of prompt_text / prompt_token_ids
  std::vector<int32_t> prompt_token_ids;
  SamplingFields sampling;
  ResponseFormat response_format;  // vLLM / SGLang constraint fields (Completions has no response_format)
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  std::string user;
  CacheDirectives cache;
};

}  // namespace ds::recipe
