#include "grammar/grammar_builder.h"

#include <fmt/format.h>

namespace ds::grammar {

uint32_t GrammarBuilder::new_rule(std::string name) {
  grammar_.rules.push_back(Rule{std::move(name), {}});
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, Alternative alt) {
  n_elements_ += alt.size();
  grammar_.rules[rule].alternatives.push_back(std::move(alt));
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  // Linear interning is fine: grammars have few distinct sets and most are found near the end.
  for (size_t i = grammar_.byte_sets.size(); i-- > 0;)
    if (grammar_.byte_sets[i] == set) return Element{Element::Kind::bytes, false, static_cast<uint32_t>(i)};
  grammar_.byte_sets.push_back(set);
  return Element{Element::Kind::bytes, false, static_cast<uint32_t>(grammar_.byte_sets.size() - 1)};
}

Result<Element> GrammarBuilder::char_class(const std::vector<CodepointRange>& ranges) {
  const std::vector<CodepointRange> merged = normalize_ranges(ranges);
  if (merged.empty()) return Status{ErrorCode::grammar_empty, "character class matches nothing"};
  ByteSet ascii;
  std::vector<Alternative> alts;
  for (const CodepointRange& r : merged) {
    for (const ByteSequence& seq : utf8_sequences(r)) {
      if (seq.size() == 1) {
        ascii.add_range(seq[0].first, seq[0].second);
        continue;
      }
      Alternative alt;
      for (auto [lo, hi] : seq) alt.push_back(bytes(ByteSet::range(lo, hi)));
      alts.push_back(std::move(alt));
    }
  }
  if (alts.empty()) return bytes(ascii);
  if (!ascii.empty()) alts.insert(alts.begin(), Alternative{bytes(ascii)});
  return choice(std::move(alts), "char");
}

void GrammarBuilder::append_literal(Alternative& alt, std::string_view text) {
  for (char c : text) alt.push_back(byte(static_cast<uint8_t>(c)));
}

Element GrammarBuilder::literal(std::string_view text) {
  const uint32_t r = new_rule("lit");
  Alternative alt;
  append_literal(alt, text);
  add_alternative(r, std::move(alt));
  return ref(r);
}

Element GrammarBuilder::optional(const Element& e) {
  const uint32_t r = new_rule("opt");
  add_alternative(r, {e});
  add_alternative(r, {});
  return ref(r);
}

Element GrammarBuilder::choice(std::vector<Alternative> alts, std::string name) {
  const uint32_t r = new_rule(std::move(name));
  for (Alternative& a : alts) add_alternative(r, std::move(a));
  return ref(r);
}

Status GrammarBuilder::append_repeat(Alternative& alt, const Element& e, int64_t min, int64_t max) {
  if (min < 0 || (max >= 0 && max < min))
    return {ErrorCode::grammar_bad_input, fmt::format("repetition bounds {{{},{}}} are inverted", min, max)};
  const int64_t biggest = max < 0 ? min : max;
  if (static_cast<uint64_t>(biggest) > limits_.max_repeat)
    return {ErrorCode::grammar_too_large,
            fmt::format("repetition bound {} exceeds the limit {}", biggest, limits_.max_repeat)};
  for (int64_t i = 0; i < min; ++i) alt.push_back(e);
  if (max < 0) {
    alt.push_back(star(e));
    return {};
  }
  // Up to kFlatRepeat optional copies go flat into the alternative (e? e? e?): the Earley item then
  // moves its dot instead of completing one nested rule per repetition, so consuming an element never
  // completes an item from an earlier set (no escape, no completion chain; docs/grammar.md).
  constexpr int64_t kFlatRepeat = 32;
  const int64_t extra = max - min;
  if (extra <= 0) return {};
  const Element opt = optional(e);
  if (extra <= kFlatRepeat) {
    for (int64_t i = 0; i < extra; ++i) alt.push_back(opt);
    return {};
  }
  // Larger bounds nest by blocks of kFlatRepeat copies, T_i -> e^B T_(i-1) | (e?)^(B-1) (B = kFlatRepeat)
  // around T_0 = (e?)^r (r = extra % B): c copies take the first alternative exactly when c >= B, so the
  // parse is unique up to the flat copies, the size stays linear, and after c copies a byte completes
  // c / B nested rules instead of c (a right-recursive chain, which Earley walks once per byte).
  Element inner{};
  bool have_inner = false;
  if (extra % kFlatRepeat != 0) {
    const uint32_t r = new_rule("rep");
    add_alternative(r, Alternative(static_cast<size_t>(extra % kFlatRepeat), opt));
    inner = ref(r);
    have_inner = true;
  }
  for (int64_t i = 0; i < extra / kFlatRepeat; ++i) {
    const uint32_t r = new_rule("rep");
    Alternative full(static_cast<size_t>(kFlatRepeat), e);
    if (have_inner) full.push_back(inner);
    add_alternative(r, std::move(full));
    add_alternative(r, Alternative(static_cast<size_t>(kFlatRepeat - 1), opt));
    inner = ref(r);
    have_inner = true;
  }
  alt.push_back(inner);
  return {};
}

Status GrammarBuilder::append_separated(Alternative& alt, const Element& e, const Element& sep, int64_t min,
                                        int64_t max) {
  if (max == 0) return {};
  const uint32_t item = new_rule("sep_item");
  add_alternative(item, {sep, e});
  Alternative body{e};
  DS_TRY(append_repeat(body, ref(item), min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1));
  if (min > 0) {
    for (Element& x : body) alt.push_back(x);
    return {};
  }
  alt.push_back(optional(choice({body}, "seq")));
  return {};
}

Element GrammarBuilder::embed(const Grammar& g) {
  const auto rule_base = static_cast<uint32_t>(grammar_.rules.size());
  std::vector<uint32_t> set_index(g.byte_sets.size());
  for (size_t i = 0; i < g.byte_sets.size(); ++i) set_index[i] = bytes(g.byte_sets[i]).index;
  for (const Rule& r : g.rules) grammar_.rules.push_back(Rule{r.name, {}});
  for (size_t i = 0; i < g.rules.size(); ++i) {
    for (Alternative alt : g.rules[i].alternatives) {
      for (Element& e : alt)
        e.index = e.kind == Element::Kind::bytes ? set_index[e.index] : rule_base + e.index;
      add_alternative(rule_base + static_cast<uint32_t>(i), std::move(alt));
    }
  }
  return ref(rule_base);
}

Result<Grammar> GrammarBuilder::finish() {
  if (grammar_.rules.size() > limits_.max_rules)
    return Status{ErrorCode::grammar_too_large, fmt::format("grammar has {} rules, over the limit {}",
                                                            grammar_.rules.size(), limits_.max_rules)};
  if (n_elements_ > limits_.max_elements)
    return Status{ErrorCode::grammar_too_large, fmt::format("grammar has {} elements, over the limit {}",
                                                            n_elements_, limits_.max_elements)};
  DS_TRY(grammar_.validate());
  DS_TRY(grammar_.prune_unproductive());
  return std::move(grammar_);
}

}  // namespace ds::grammar
