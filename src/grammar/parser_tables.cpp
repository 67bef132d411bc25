#include "grammar/parser_tables.h"

#include "grammar/repeat_run.h"

namespace ds::grammar {

ParserTables ParserTables::build(const Grammar& g) {
  ParserTables t;
  t.byte_sets = g.byte_sets;
  t.rule_starts.resize(g.rules.size());
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (const Alternative& alt : g.rules[r].alternatives) {
      t.rule_starts[r].push_back(static_cast<uint32_t>(t.kinds.size()));
      t.add_alternative_kinds(r, alt);
    }
  }
  // Byte classes by refinement: each byte set splits every class into its members and the rest.
  t.byte_class.fill(0);
  t.n_byte_classes = 1;
  for (const ByteSet& set : t.byte_sets) {
    std::array<int16_t, 512> renumber;  // (old class << 1 | in set) -> new class
    renumber.fill(-1);
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      int16_t& to = renumber[size_t{t.byte_class[b]} << 1 | (set.contains(static_cast<uint8_t>(b)) ? 1 : 0)];
      if (to < 0) to = static_cast<int16_t>(n++);
      t.byte_class[b] = static_cast<uint8_t>(to);
    }
    t.n_byte_classes = n;
  }
  constexpr uint32_t kUnset = 0xfffffffeu;
  t.sole_parent.assign(g.rules.size(), kUnset);
  for (uint32_t k = 0; k < t.kinds.size(); ++k) {
    const ItemKind& kind = t.kinds[k];
    if (kind.next != ItemKind::Next::rule) continue;
    uint32_t& sole = t.sole_parent[kind.index];
    sole = sole == kUnset ? k : (sole == k ? k : kManyParents);
  }
  for (uint32_t& sole : t.sole_parent)
    if (sole == kUnset) sole = kManyParents;
  if (!t.sole_parent.empty()) t.sole_parent[0] = kManyParents;  // the start rule also has the implicit top
  // Nullable rules by fixpoint: an alternative is nullable when each element is starred or a nullable rule.
  t.nullable.assign(g.rules.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < g.rules.size(); ++r) {
      if (t.nullable[r]) continue;
      for (const Alternative& alt : g.rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt)
          if (!e.star && !(e.kind == Element::Kind::rule && t.nullable[e.index])) {
            all = false;
            break;
          }
        if (all) {
          t.nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  t.n_grammar_kinds = t.kinds.size();
  add_repeat_runs(g, t);  // after sole_parent and nullable: shadow kinds never count as references
  return t;
}

void ParserTables::add_alternative_kinds(uint32_t rule, const Alternative& alt) {
  const auto first = static_cast<uint32_t>(kinds.size());
  for (uint32_t d = 0; d <= alt.size(); ++d) {
    ItemKind k;
    k.rule = rule;
    k.advanced = first + d + 1;
    if (d < alt.size()) {
      k.next = alt[d].kind == Element::Kind::bytes ? ItemKind::Next::bytes : ItemKind::Next::rule;
      k.star = alt[d].star;
      k.index = alt[d].index;
    } else {
      k.advanced = first + d;  // an end item does not advance
    }
    kinds.push_back(k);
  }
}

}  // namespace ds::grammar
