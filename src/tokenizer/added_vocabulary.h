// Added tokens (special markers such as <｜begin▁of▁sentence｜>, and non-special extras such as
// <｜User｜>) and how Hugging Face finds them in text before any BPE: leftmost-longest matching,
// first of the tokens with normalized=false on the raw text, then of those with normalized=true
// on the remaining (normalized) pieces, honouring each token's single_word/lstrip/rstrip flags.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/compiled_regex.h"

namespace ds {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// One piece of text after splitting: either an added token (token_id ≥ 0) or plain text for BPE.
struct TextSegment {
  std::string_view text;
  int32_t token_id = -1;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // Tokens with empty content are ignored, as HF does. `source` names the file in errors.
  static Result<AddedVocabulary> build(std::vector<AddedToken> tokens, std::string_view source);

  // Splits `text` into added tokens and plain segments, in order. Plain segments are never empty.
  // Only the identity normalizer is supported (the loader rejects others), so the second pass
  // matches normalized tokens against the raw remaining text.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* find_by_id(int32_t id) const;  // nullptr if `id` is not an added token
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over one set of token contents, giving leftmost-longest matches.
  class Trie {
   public:
    void insert(std::string_view content, int32_t token_index);
    // Longest token starting exactly at `pos`: its index and length, or {-1, 0}.
    std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;
    bool can_start(uint8_t byte) const { return first_byte_[byte]; }
    bool empty() const { return nodes_.size() <= 1; }

   private:
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node index), few per node
      int32_t token_index = -1;
    };
    std::vector<Node> nodes_{Node{}};
    std::array<bool, 256> first_byte_{};
  };

  // HF's find_matches over one trie, appending to `out`; `text` is one plain segment.
  void split_with(const Trie& trie, std::string_view text, std::vector<TextSegment>& out) const;

  // Rust regex's Unicode \w for single_word tokens: compiled only if some token needs it.
  bool is_word_char_at(std::string_view text, size_t pos) const;
  bool ends_with_word(std::string_view text) const;

  std::vector<AddedToken> tokens_;
  std::unique_ptr<CompiledRegex> word_char_;
  std::unordered_map<std::string, int32_t> id_of_content_;
  std::unordered_map<int32_t, size_t> index_of_id_;
  Trie raw_trie_;         // tokens with normalized = false
  Trie normalized_trie_;  // tokens with normalized = true
};

}  // namespace ds
