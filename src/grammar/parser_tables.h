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

// A run of identical copies of one element in an alternative, as GrammarBuilder::append_repeat lowers
// e{m,n} (n <= 32): m required copies `e`, then n - m optional ones `(e|)`, then a byte element T. The
// positions k = 0..n_copies (k copies consumed) are n + 1 different parser states, each its own first
// visit; repeat_run.h derives all their masks from one walk of a shadow alternative [e*, T, rest...]
// (never predicted: its item kinds sit after the grammar's, from ParserTables::n_grammar_kinds on).
struct RepeatRun {
  uint32_t first_kind = 0;            // the dot before copy 0; position k is the item kind first_kind + k
  uint32_t n_copies = 0;              // n
  uint32_t n_required = 0;            // m
  uint32_t shadow_kind = 0;           // the shadow alternative's dot before e* (the next kind: before T)
  uint32_t element_rules = kNoRules;  // index into ParserTables::run_element_rules; kNoRules: e is bytes
  // Runs of one class have the same element e and the same T: their walks agree until T is scanned, so
  // that part is walked once per class (repeat_run.h).
  uint32_t run_class = 0;
  static constexpr uint32_t kNoRules = 0xffffffffu;
};

struct ParserTables {
  std::vector<ItemKind> kinds;
  size_t n_grammar_kinds = 0;  // kinds past this are shadow kinds of repeat runs
  std::vector<RepeatRun> runs;
  size_t n_run_classes = 0;
  // Per element rule of a run: per rule, 1 if reachable from that element (its characters' items).
  std::vector<std::vector<uint8_t>> run_element_rules;
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
  // Appends the item kinds of one alternative of `rule` (dot 0 .. end).
  void add_alternative_kinds(uint32_t rule, const Alternative& alt);
};

}  // namespace ds::grammar
