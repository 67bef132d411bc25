// The one grammar form every compiler (regex, JSON Schema, GBNF) lowers to: a context-free grammar over
// bytes. A rule is a list of alternatives; an alternative is a sequence of elements; an element is a byte
// set (a terminal: one byte out of a 256-bit set) or a reference to a rule, either once or repeated zero or
// more times (`star`). Star is kept as a first-class element rather than lowered to right recursion because
// the Earley matcher then keeps a loop inside one item: a string's characters never complete a rule, so the
// per-state token cache stays context independent for the whole string (docs/grammar.md).
// Rule 0 is the start rule. Text outside the grammar's language is rejected byte by byte.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::grammar {

// 256-bit set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
  }
  void add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  void add_all(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
  }
  bool contains(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  ByteSet complement() const {
    ByteSet s;
    for (int i = 0; i < 4; ++i) s.words[i] = ~words[i];
    return s;
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum class Kind : uint8_t { bytes, rule };
  Kind kind = Kind::bytes;
  bool star = false;   // zero or more repetitions of this element
  uint32_t index = 0;  // byte-set index (Grammar::byte_sets) or rule index

  bool operator==(const Element&) const = default;
};

using Alternative = std::vector<Element>;  // empty = the empty string

struct Rule {
  std::string name;  // for messages and printing
  std::vector<Alternative> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;  // rules[0] is the start rule
  std::vector<ByteSet> byte_sets;

  size_t n_elements() const;
  // Checks rule/byte-set indices and that the start rule has an alternative; internal error otherwise.
  Status validate() const;
  // Drops alternatives that can never finish (they need a rule deriving no finite string), so the
  // matcher never allows a byte it cannot complete. grammar_empty when the start rule itself cannot.
  Status prune_unproductive();
  // 64-bit content hash (for the compiled-grammar cache).
  uint64_t hash() const;
  // A readable GBNF-like listing (tests, debugging).
  std::string to_string() const;
};

// Limits every compiler honours (configurable; exceeding one is a user error naming the limit).
struct GrammarLimits {
  size_t max_elements = 200'000;  // total elements over all alternatives
  size_t max_rules = 50'000;
  size_t max_repeat = 10'000;       // largest bound in {m,n}, minLength/maxLength, minItems/maxItems
  double max_compile_ms = 2'000.0;  // wall time of one compile
  size_t max_nesting = 200;         // parser recursion (regex groups, schema nesting)
};

}  // namespace ds::grammar
