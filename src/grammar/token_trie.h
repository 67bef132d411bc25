// The vocabulary as a byte trie laid out in preorder: node i's subtree is [i, subtree_end(i)), so a walk
// that rejects a node skips its whole subtree with one jump and never follows a pointer. Built once per
// tokenizer and shared by every compiled grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds {
class Tokenizer;
}

namespace ds::grammar {

class TokenTrie {
 public:
  // token_bytes[id]: the id's bytes; empty = never produced by a grammar (special tokens, padding).
  // eos_id: allowed exactly when the grammar accepts (-1: none).
  static TokenTrie build(const std::vector<std::string>& token_bytes, int32_t eos_id);
  // Every non-special id of the tokenizer, as its byte-level decoded bytes (partial UTF-8 included),
  // plus the special tokens whose text is in `markers`, as that text (a grammar that writes them).
  static Result<TokenTrie> from_tokenizer(const Tokenizer& tokenizer,
                                          const std::vector<std::string>& markers = {});

  size_t n_nodes() const { return byte_.size(); }
  uint8_t byte(uint32_t node) const { return byte_[node]; }
  uint32_t depth(uint32_t node) const { return depth_[node]; }  // 1 for a first byte
  uint32_t max_depth() const { return max_depth_; }             // the longest token's length
  uint32_t subtree_end(uint32_t node) const { return end_[node]; }
  uint32_t parent(uint32_t node) const { return parent_[node]; }  // kRoot for a first byte
  std::span<const int32_t> tokens_at(uint32_t node) const {
    return {token_ids_.data() + token_begin_[node], token_begin_[node + 1] - token_begin_[node]};
  }

  size_t vocab_size() const { return token_bytes_.size(); }  // mask width
  int32_t eos_id() const { return eos_id_; }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }

  static constexpr uint32_t kRoot = 0xffffffffu;

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> parent_;
  std::vector<uint32_t> token_begin_;  // [n_nodes + 1] into token_ids_
  std::vector<int32_t> token_ids_;
  std::vector<std::string> token_bytes_;
  int32_t eos_id_ = -1;
  uint32_t max_depth_ = 0;
};

}  // namespace ds::grammar
