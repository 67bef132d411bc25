// Prompt-cache fields of the APIs (docs/kvcache.md, Cache control in the APIs), read into
// CacheDirectives with the offending field named in every error (HTTP 400):
// - our own `"cache": {"class": "agent", "ttl_s": N, "pin": true, "salt": "..."}` on every API;
// - OpenAI's `prompt_cache_key` and `prompt_cache_retention` ("in-memory" | "24h");
// - Anthropic's `cache_control: {"type": "ephemeral", "ttl": "5m" | "1h"}` breakpoints on system
//   blocks, message content blocks and tools (and the top-level automatic breakpoint).
// Precedence for the TTL: cache.ttl_s, else the longest Anthropic breakpoint, else retention 24h,
// else the server's TTL for the traffic class.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/json_fields.h"

namespace ds::recipe {

inline constexpr int64_t kMaxCacheTtlS = 30 * 86400;  // cache.ttl_s upper bound (30 days)
inline constexpr size_t kMaxCacheSaltBytes = 256;
inline constexpr size_t kMaxPromptCacheKeyBytes = 1024;
inline constexpr int32_t kMaxAnthropicBreakpoints = 4;  // Anthropic's limit

// Our `cache` object. Reads after the API's own fields, so its ttl_s wins. Unknown keys are refused
// (a typo would otherwise silently change nothing).
Status read_cache_object(const Json& body, CacheDirectives& out);

// OpenAI's prompt_cache_key (non-empty, <= 1024 bytes) and prompt_cache_retention.
Status read_openai_cache_fields(const Json& body, CacheDirectives& out);

// Where a breakpoint sits; Anthropic orders the prompt tools, system, messages.
enum class BreakpointSection { tools = 0, system = 1, messages = 2, top_level = 3 };

// Anthropic's breakpoints, collected while a request is converted, checked at the end.
class AnthropicBreakpoints {
 public:
  // Reads obj["cache_control"] when present; `path` is obj's own path.
  Status read(const Json& obj, std::string_view path, BreakpointSection section);
  // At most 4, and in prompt order a 1h breakpoint never after a 5m one (Anthropic's rules); then
  // n_breakpoints and ttl_s (the longest) go to `out`.
  Status finish(CacheDirectives& out) const;

 private:
  struct Breakpoint {
    std::string path;
    int64_t ttl_s = 0;
    BreakpointSection section = BreakpointSection::messages;
  };
  std::vector<Breakpoint> breakpoints_;  // in reading order
};

}  // namespace ds::recipe
