// The prompt token ids a worker will compute for a request, rendered and tokenized with the recipe
// exactly as `deepinfer serve`'s generation routes do (same conversion, same encoding, same
// tokenizer files), so the router's block hashes are the worker's prefix-cache keys. Plus the
// session key that pins a conversation to a worker: prompt_cache_key, else user.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/api_routes.h"
#include "recipe/conversion_options.h"
#include "recipe/encoding.h"
#include "tokenizer/tokenizer.h"

namespace ds::cluster {

struct PromptRendering {
  const Tokenizer* tokenizer = nullptr;  // null: no ids (only the session key is read)
  recipe::PromptEncodingKind encoding = recipe::PromptEncodingKind::deepseek_v3;
  recipe::ConversionOptions conversion;
};

struct RequestPrompt {
  std::vector<int32_t> token_ids;      // empty when the body does not convert (the worker answers the 400)
  std::optional<std::string> session;  // prompt_cache_key or user
  std::optional<uint64_t> salt_tag;    // salt_tag_of(cache.salt) (our "cache" field), none unsalted
  bool stream = false;
};

// Never fails on a bad body: routing does not validate, the worker does (with its own error shape).
RequestPrompt request_prompt(server::ApiKind kind, std::string_view body, const PromptRendering& rendering);

}  // namespace ds::cluster
