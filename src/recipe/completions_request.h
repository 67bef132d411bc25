// OpenAI Completions (POST /v1/completions, legacy): a raw prompt, no chat template.
// prompt: a string, a one-string array, an array of token ids, or a one-array array of ids (one
// prompt per request: n and batches are unsupported). suffix (FIM) and best_of > 1 are rejected.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "recipe/chat_types.h"
#include "recipe/conversion_options.h"
#include "recipe/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace ds::recipe {

Result<CompletionRequest> parse_completions_request(std::string_view body, const ConversionOptions& options);
Result<CompletionRequest> convert_completions_request(const Json& body, const ConversionOptions& options);

struct CompletionEncodingOptions {
  // The client writes the whole prompt, template included, so marker texts in it are special
  // tokens (as in HF's default encode). Set false to BPE everything.
  bool parse_special = true;
  // Put BOS first unless the prompt already starts with it (exactly one BOS either way).
  bool add_bos = true;
};

// Token ids of a completion prompt. Token-id prompts are returned as given (the engine checks
// them against the vocabulary).
Result<std::vector<int32_t>> encode_completion_prompt(const CompletionRequest& request,
                                                      const Tokenizer& tokenizer,
                                                      const CompletionEncodingOptions& options = {});

}  // namespace ds::recipe
