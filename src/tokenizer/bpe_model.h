// The BPE model of a byte-level tokenizer: vocabulary, merge ranks, and the merge loop that turns
// one pre-tokenized word (raw bytes) into token ids exactly as Hugging Face's BPE does: start
// from one symbol per byte, then repeatedly apply the lowest-ranked merge present, leftmost first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/word_cache.h"

namespace ds {

struct BpeModelSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // byte-level spelled token -> id
  std::vector<std::pair<std::string, std::string>> merges;  // (left, right) in rank order
  std::optional<std::string> unk_token;  // used for bytes whose character is not in the vocab
  bool fuse_unk = false;                 // consecutive unknown bytes become one unk token
  bool ignore_merges = false;            // a word that is itself in the vocab is taken whole
};

class BpeModel {
 public:
  // `source` names the file in error messages (tokenizer_bad_file).
  static Result<BpeModel> build(const BpeModelSpec& spec, std::string_view source);

  // Appends the ids of one pre-tokenized word, given as raw bytes.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // Same result without the cache, using the heap-based loop for any length (tests compare the
  // two loops; the fast path only switches algorithm by length).
  void encode_word_uncached(std::string_view word, std::vector<int32_t>& out, bool force_heap) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Byte-level spelling of `id`; empty if the vocab has no such id.
  std::string_view token_text(int32_t id) const;
  bool has_id(int32_t id) const { return id >= 0 && id < id_limit() && has_id_[static_cast<size_t>(id)]; }
  int32_t id_limit() const { return static_cast<int32_t>(text_of_id_.size()); }  // highest id + 1
  const ByteLevelAlphabet& alphabet() const { return alphabet_; }

 private:
  BpeModel() = default;
  // Initial symbols: one id per byte; unknown bytes become unk (or vanish without one, as in HF).
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  void merge_short(std::vector<int32_t>& symbols) const;  // O(n^2) in ints, fast for short words
  void merge_long(std::vector<int32_t>& symbols) const;   // O(n log n) heap, for long words

  ByteLevelAlphabet alphabet_;
  std::unordered_map<std::string, int32_t> id_of_text_;
  std::vector<std::string> text_of_id_;
  std::vector<bool> has_id_;
  std::array<int32_t, 256> id_of_byte_{};  // -1 if the byte's character is not in the vocab
  MergeTable merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  WordCache cache_;
};

}  // namespace ds
