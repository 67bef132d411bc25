// What every API's response builder shares: the response's identity, token usage (DeepSeek's
// prompt-cache fields), per-token logprobs, stream events, and the whole output collected from the
// parser's deltas (for non-stream bodies).
//
// Builders are pure functions of their inputs: ids and timestamps come in through ResponseMeta,
// so tests compare exact JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "recipe/json_fields.h"
#include "recipe/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace ds::recipe {

struct ResponseMeta {
  // Used verbatim as the response id, and inside derived ids (`call_<id>_<i>`, `toolu_<id>_<i>`,
  // `msg_<id>_<n>`): the server picks it with the API's usual prefix ("chatcmpl-…", "msg_…").
  std::string id;
  std::string model;
  int64_t created_unix_s = 0;
  std::string system_fingerprint;  // OpenAI APIs; "" writes null
};

struct ResponseUsage {
  int64_t prompt_tokens = 0;
  int64_t prompt_cache_hit_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;        // OutputParser::completion_tokens()
  int64_t reasoning_tokens = 0;         // OutputParser::reasoning_tokens()
  // Prompt tokens this request wrote into the prefix cache (Anthropic's cache_creation_input_tokens,
  // reported only for requests with cache directives): part of the misses.
  int64_t cache_creation_tokens = 0;

  // prompt − hits, floored at 0 (as deepseek-recipe builds it).
  int64_t prompt_cache_miss_tokens() const {
    return prompt_tokens > prompt_cache_hit_tokens ? prompt_tokens - prompt_cache_hit_tokens : 0;
  }
};

// OpenAI Chat Completions usage with DeepSeek's fields: prompt_tokens, completion_tokens,
// total_tokens, prompt_tokens_details.cached_tokens, prompt_cache_hit_tokens,
// prompt_cache_miss_tokens, completion_tokens_details.reasoning_tokens.
Json openai_usage_json(const ResponseUsage& usage);

// One generated token for logprobs. `bytes` are the token's own bytes (possibly part of a UTF-8
// character); the server gets them from the tokenizer.
struct TopLogprob {
  int32_t token_id = 0;
  std::string bytes;
  float logprob = 0.0f;
};
struct TokenLogprobInfo {
  int32_t token_id = 0;
  std::string bytes;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;  // most likely first; empty unless top_logprobs was asked for
};

// A token id and its logprob as the sampler reports them (sampling's TokenLogprob; recipe may
// not include sampling).
struct IdLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};
// The chosen token and its alternatives with their bytes from the tokenizer (special tokens give
// their text); tokenizer_unknown_id for an id the tokenizer does not know.
Result<TokenLogprobInfo> token_logprob_info(const Tokenizer& tokenizer, IdLogprob chosen,
                                            const std::vector<IdLogprob>& top);

// OpenAI's `{token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}` for each token:
// `token` is the bytes as text (invalid UTF-8 replaced by U+FFFD), `bytes` the exact byte values.
Json openai_logprobs_content(const std::vector<TokenLogprobInfo>& tokens);

// `bytes` as text, invalid UTF-8 (a token that is half a character) replaced by U+FFFD.
std::string lossy_utf8(const std::string& bytes);
// The meta's system_fingerprint, null when empty.
Json system_fingerprint_json(const ResponseMeta& meta);
// The envelope every OpenAI chat/completions body and chunk shares: {id, object, created, model,
// system_fingerprint, choices: [choice], usage}. `usage` is left out when it is a discarded value
// (Json(Json::value_t::discarded)); pass null for "usage": null.
Json openai_envelope(const ResponseMeta& meta, const char* object, Json choice, Json usage);

// One server-sent event as a stream builder makes it: the server frames it, once, as
// "event: <name>\ndata: <data>\n\n" ("data: <data>\n\n" without a name).
struct StreamEvent {
  std::string name;  // "" for the OpenAI APIs' unnamed events
  std::string data;  // compact JSON (invalid UTF-8 replaced: a model can emit it), or "[DONE]"
  bool operator==(const StreamEvent&) const = default;
};
using StreamEvents = std::vector<StreamEvent>;
StreamEvent data_event(const Json& data);
StreamEvent named_event(std::string_view name, const Json& data);
StreamEvent done_event();  // OpenAI's closing `data: [DONE]`
// `n` > 1: the stream's last events after every choice closed, in OpenAI's shape: a chunk with no
// choices carrying the whole request's usage, then `data: [DONE]`.
StreamEvents openai_stream_end(const ResponseMeta& meta, const char* object, const ResponseUsage& usage);
// `n` > 1: one body out of each choice's own body (choices[0] of each, in order) with the whole
// request's usage.
Json openai_merge_choices(std::vector<Json> bodies, const ResponseUsage& usage);
// JSON text with invalid UTF-8 replaced (for non-stream bodies too).
std::string dump_json(const Json& value);

// A tool call assembled from its deltas.
struct CollectedToolCall {
  std::string name;
  std::string arguments;  // JSON object text as the parser rebuilt it
};

// The whole output of one generation, in order of first appearance of each part.
struct CollectedOutput {
  std::string reasoning;
  std::string content;
  std::vector<CollectedToolCall> tool_calls;

  void add(const OutputDelta& delta);
  void add(const std::vector<OutputDelta>& deltas) {
    for (const OutputDelta& d : deltas) add(d);
  }
};

}  // namespace ds::recipe
