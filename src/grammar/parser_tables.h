// The Earley matcher's view of a Grammar: every dotted position (rule, alternative, dot) numbered as an
// item kind with what stands after the dot, so a step never walks the rule structure.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace ds::grammar {

struct ItemKind {
  enum class Next : uint8_t { end, bytes, rule };
  Next next = Next::end;  // what follows the dot
  bool star = false;      // the element after the dot repeats (Next::bytes / Next::rule)
  uint32_t index = 0;     // byte-set or rule index of that element
  uint32_t rule = 0;      // the rule this item belongs to
  uint32_t advanced = 0;  // the item kind with the dot moved past the element
};

struct ParserTables {
  std::vector<ItemKind> kinds;
  std::vector<std::vector<uint32_t>> rule_starts;  // per rule: item kinds with the dot at 0
  std::vector<uint8_t> nullable;                   // per rule: derives the empty string
  // Per rule: the one item kind that refers to it (every reference sits at the same element of the
  // same alternative), or kManyParents. When such a rule completes in local mode, its parent's kind is
  // known even though the parent's set is not: the token cache walks on instead of escaping.
  std::vector<uint32_t> sole_parent;
  static constexpr uint32_t kManyParents = 0xffffffffu;
  std::vector<ByteSet> byte_sets;
  // Bytes that belong to exactly the same byte sets drive the parser alike: byte_class[b] numbers those
  // classes 0..n_byte_classes-1 (LocalDfa keeps one transition per class, not per byte).
  std::array<uint8_t, 256> byte_class{};
  uint32_t n_byte_classes = 1;

  static ParserTables build(const Grammar& g);
};

}  // namespace ds::grammar
