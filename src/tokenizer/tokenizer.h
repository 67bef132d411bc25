// Byte-level BPE tokenizer loaded from a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`),
// giving exactly the ids of Hugging Face's tokenizers library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds {

struct TokenizerImpl;

// Thread-safe after load: all methods are const and may be called concurrently (the internal
// BPE word cache locks per slot stripe; regex match state is per call).
class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and (optionally) DIR/tokenizer_config.json.
  static Result<Tokenizer> load(const std::string& dir);
  // Same from JSON texts already in memory (config_json may be empty: no tokenizer_config.json).
  // `source` names them in error messages.
  static Result<Tokenizer> from_json(const std::string& tokenizer_json, const std::string& config_json,
                                     const std::string& source);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // parse_special = true: added tokens written in the text become their ids (as HF does).
  // parse_special = false: the whole text is plain BPE (how user text in a chat is encoded).
  // Invalid UTF-8 is an error (tokenizer_bad_input) naming the byte offset. Never adds BOS.
  Result<std::vector<int32_t>> encode(std::string_view text, bool parse_special = true) const;
  // Concatenated bytes of the tokens (byte-level decoded). May be invalid UTF-8 when `ids`
  // ends or starts mid-character; ids out of range are an error.
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // vocab or added token
  int32_t vocab_size() const;  // highest id + 1 over vocab and added tokens
  int32_t bos_id() const;      // -1 if none
  int32_t eos_id() const;
  bool add_bos_by_default() const;  // tokenizer_config.json add_bos_token
  bool is_special(int32_t id) const;
  // Decoded bytes of one id (empty for a skipped special token); tokenizer_unknown_id if unknown.
  Result<std::string_view> token_bytes(int32_t id, bool skip_special = false) const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Turns a stream of ids into text pieces that are always complete UTF-8: bytes of a character
// split across tokens are held back until the character is complete.
class StreamDetokenizer {
 public:
  explicit StreamDetokenizer(const Tokenizer& tok, bool skip_special = false);
  // Text that became complete with this id (may be empty).
  Result<std::string> push(int32_t id);
  // Whatever is held back at end of stream; incomplete sequences become U+FFFD.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace ds
