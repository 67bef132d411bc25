// Byte-level Earley recognizer with a stack of item sets: push_byte adds one set, pop_to drops sets, so
// token rollback and the vocabulary-trie walk are both truncations (no copies).
//
// Why Earley (docs/grammar.md): it accepts every CFG the compilers emit (left recursion, ambiguity,
// nullable rules) without a grammar transformation, and its item sets are exactly what the per-state
// token cache needs: items whose origin is the current set are "local"; those from earlier sets only
// matter when one of them completes. Star elements loop inside an item (no completion), so the inside
// of a string or a number is local and its token set is cached once per grammar.
//
// Local mode (for the cache): the parser starts from one set whose items from earlier sets carry the
// origin kExternal; completing such an item sets escaped() instead of looking at the missing context.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/parser_tables.h"

namespace ds::grammar {

class EarleyParser {
 public:
  static constexpr uint32_t kExternal = 0xffffffffu;

  struct Item {
    uint32_t kind = 0;
    uint32_t origin = 0;  // index of the set where the item's rule started, or kExternal
  };

  explicit EarleyParser(const ParserTables& tables);

  // One set predicting the start rule.
  void reset();
  // Local mode: one set holding `from`'s last set, its items from earlier sets marked kExternal.
  void reset_local(const EarleyParser& from);
  // Local mode: one set holding these item kinds with origin kExternal, closed (predictions and
  // completions added). The state any parse reaches when exactly these items stand after a scan.
  void reset_local_items(std::span<const uint32_t> kinds);

  // Scans `byte` from the last set. True: a new non-empty set was pushed. False: nothing changed.
  bool push_byte(uint8_t byte);
  // Keeps the first n_sets sets (n_sets >= 1).
  void pop_to(size_t n_sets);
  size_t n_sets() const { return set_begin_.size(); }

  // The start rule is complete over everything pushed.
  bool is_accepting() const;
  // Some byte can still be scanned.
  bool can_continue() const;
  // Every byte some item of the last set can scan (push_byte succeeds exactly for these).
  ByteSet next_bytes() const;
  // The last push_byte completed an item with an external origin (local mode only).
  bool escaped() const { return escaped_; }

  // The items of the last set (LocalDfa names sets by them).
  std::span<const Item> last_set() const {
    return {items_.data() + set_begin_.back(), items_.size() - set_begin_.back()};
  }
  const ParserTables& tables() const { return *tables_; }

  // The last set's items that can still act (no end items) as sorted (kind << 1 | is_local) values: the
  // key of the token cache.
  void state_key(std::vector<uint64_t>& out) const;

 private:
  void add(uint32_t kind, uint32_t origin);
  void close_last_set();
  void complete(uint32_t rule, uint32_t origin);
  size_t set_end(size_t s) const { return s + 1 < set_begin_.size() ? set_begin_[s + 1] : items_.size(); }

  const ParserTables* tables_;
  std::vector<Item> items_;
  std::vector<uint32_t> set_begin_;
  // Deduplication of the set being built: per kind, the stamp of the set and the first item with it,
  // chained through same_kind_next_ (parallel to items_).
  std::vector<uint32_t> stamp_;
  std::vector<uint32_t> first_of_kind_;
  std::vector<uint32_t> same_kind_next_;
  uint32_t generation_ = 0;
  bool escaped_ = false;
};

}  // namespace ds::grammar
