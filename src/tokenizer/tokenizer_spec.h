// What a Hugging Face tokenizer directory says, parsed and checked: tokenizer.json (model, added
// tokens, pre-tokenizer) and the optional tokenizer_config.json (BOS/EOS, add_bos_token).
// Anything this engine does not implement exactly (other normalizers, decoders, BPE dropout, ...)
// is rejected here with tokenizer_bad_file naming the file and field, rather than approximated.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"

namespace ds {

struct TokenizerSpec {
  BpeModelSpec bpe;
  std::vector<AddedToken> added_tokens;
  std::vector<std::string> split_patterns;  // Split(Isolated) regexes, applied in order
  // From tokenizer_config.json; all optional.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  bool add_bos_token = false;
};

// Parses the JSON texts; `json_name`/`config_name` name them in error messages.
Result<TokenizerSpec> parse_tokenizer_json(const std::string& json_text, const std::string& json_name);
Status parse_tokenizer_config(const std::string& config_text, const std::string& config_name,
                              TokenizerSpec& spec);

// Reads DIR/tokenizer.json and, if present, DIR/tokenizer_config.json.
Result<TokenizerSpec> load_tokenizer_spec(const std::string& dir);

}  // namespace ds
