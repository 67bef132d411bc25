// A DFA over the token cache's local parser states, built lazily while the vocabulary trie is walked
// (the first visit of a grammar state, docs/grammar.md "Token masks").
//
// Why: a first visit walks the local Earley parser over every trie node the state accepts, and inside a
// free string that is most of the 274 k nodes at ~1 µs per Earley step. But the parser's sets repeat:
// after each character of a string the set is the one before, up to origins. A set's future depends only
// on its items that can still act (end items were completed when the set was closed) and, through the
// origins, on the sets those items started in. So a set is named by its interned content, with each
// origin written as "external", "this set" or the id of the origin set (hash consing). Equal ids behave
// alike for every byte, so a transition computed once (one Earley push) serves every later node with the
// same state and byte: the walk becomes one table lookup per node.
//
// Guarded by its CompiledGrammar (one walk at a time). Bounded by max_states: past it, new states are
// not interned and the walk uses the Earley parser for them (slower, never wrong); the grammar clears
// a full DFA before its next walk.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/earley_parser.h"

namespace ds::grammar {

class LocalDfa {
 public:
  static constexpr uint32_t kNoState = 0xffffffffu;
  // Transition results besides a state id.
  static constexpr int32_t kUnknown = -1;  // not computed yet
  static constexpr int32_t kDead = -2;     // the byte is rejected
  static constexpr int32_t kEscaped = -3;  // the byte completes an item from outside the local parser

  // Transitions are kept per byte class of `tables` (ParserTables::byte_class), not per byte.
  LocalDfa(const ParserTables& tables, size_t max_states)
      : byte_class_(tables.byte_class), n_classes_(tables.n_byte_classes), max_states_(max_states) {}

  // The id of `parser`'s last set; set_ids[s] is the id of its set s for every earlier set. kNoState when
  // the DFA is full and the set is new.
  uint32_t intern(const EarleyParser& parser, std::span<const uint32_t> set_ids);

  int32_t next(uint32_t state, uint8_t byte) const { return next_[state * n_classes_ + byte_class_[byte]]; }
  void set_next(uint32_t state, uint8_t byte, int32_t result) {
    next_[state * n_classes_ + byte_class_[byte]] = result;
  }

  size_t n_states() const { return next_.size() / n_classes_; }
  // A state's content: sorted (kind << 32 | origin) values, origin kRefExternal, kRefThisSet or a state id.
  std::span<const uint64_t> key(uint32_t state) const { return keys_[state]; }
  static constexpr uint32_t kRefExternal = 0xffffffffu;
  static constexpr uint32_t kRefThisSet = 0xfffffffeu;
  bool full() const { return n_states() >= max_states_; }
  void clear();

  // Counters for tests and the bench: transitions looked up / computed with the parser.
  uint64_t n_hits = 0;
  uint64_t n_misses = 0;

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint64_t>& k) const;
  };
  std::array<uint8_t, 256> byte_class_;
  size_t n_classes_;
  size_t max_states_;
  std::unordered_map<std::vector<uint64_t>, uint32_t, KeyHash> ids_;
  std::vector<int32_t> next_;                // [state * n_classes_ + class]: a transition result
  std::vector<std::vector<uint64_t>> keys_;  // per state
  std::vector<uint64_t> key_;
};

}  // namespace ds::grammar
