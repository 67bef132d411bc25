// GrammarBuilder: how compilers write a Grammar. Interns byte sets, names rules, lowers the usual EBNF
// conveniences (literal strings, optional, one-or-more, bounded repetition) into the core form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace ds::grammar {

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  // A new rule with no alternatives yet; rule 0 (the first one made) is the start rule.
  uint32_t new_rule(std::string name);
  void add_alternative(uint32_t rule, Alternative alt);
  size_t n_rules() const { return grammar_.rules.size(); }
  size_t n_elements() const { return n_elements_; }
  bool has_alternatives(uint32_t rule) const { return !grammar_.rules[rule].alternatives.empty(); }

  Element bytes(const ByteSet& set);
  Element byte(uint8_t b) { return bytes(ByteSet::single(b)); }
  static Element ref(uint32_t rule) { return Element{Element::Kind::rule, false, rule}; }
  static Element star(Element e) {
    e.star = true;
    return e;
  }
  // One character (UTF-8 encoded) out of the codepoint ranges: a byte set when all are ASCII, else a
  // rule whose alternatives are the UTF-8 byte sequences. Empty ranges: an error (empty class).
  Result<Element> char_class(const std::vector<CodepointRange>& ranges);
  // Appends the bytes of `text` as one element each.
  void append_literal(Alternative& alt, std::string_view text);
  // A rule matching exactly `text`.
  Element literal(std::string_view text);
  // A rule: e | empty.
  Element optional(const Element& e);
  // A rule: the alternatives given (each a sequence).
  Element choice(std::vector<Alternative> alts, std::string name = "choice");
  // e repeated between min and max times (max < 0: unbounded), appended to `alt`. Bounds above
  // limits.max_repeat are an error (grammar_too_large).
  Status append_repeat(Alternative& alt, const Element& e, int64_t min, int64_t max);
  // The same when a separator goes between repetitions: e (sep e){min-1, max-1}; min 0 allows none.
  Status append_separated(Alternative& alt, const Element& e, const Element& sep, int64_t min, int64_t max);

  // Copies every rule and byte set of `g` in (indices shifted) and returns a reference to its start rule:
  // a grammar compiled on its own (a JSON Schema) becomes one element of this one.
  Element embed(const Grammar& g);

  // Checks the size limits, validates and returns the grammar (the builder is spent).
  Result<Grammar> finish();

 private:
  GrammarLimits limits_;
  Grammar grammar_;
  size_t n_elements_ = 0;
};

}  // namespace ds::grammar
