#include "grammar/repeat_run.h"

#include <algorithm>
#include <map>
#include <optional>

#include "grammar/token_bitmask.h"

namespace ds::grammar {

namespace {

// x when `e` refers to a rule whose alternatives are exactly [x] and the empty one
// (GrammarBuilder::optional).
std::optional<Element> optional_of(const Grammar& g, const Element& e) {
  if (e.kind != Element::Kind::rule || e.star) return std::nullopt;
  const Rule& r = g.rules[e.index];
  if (r.alternatives.size() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    const Alternative& one = r.alternatives[static_cast<size_t>(i)];
    const Alternative& other = r.alternatives[static_cast<size_t>(1 - i)];
    if (one.size() == 1 && other.empty() && !one[0].star) return one[0];
  }
  return std::nullopt;
}

// Per rule: reachable from `rule` through rule references.
std::vector<uint8_t> reachable_rules(const Grammar& g, uint32_t rule) {
  std::vector<uint8_t> seen(g.rules.size(), 0);
  std::vector<uint32_t> todo{rule};
  seen[rule] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (const Alternative& alt : g.rules[r].alternatives)
      for (const Element& e : alt)
        if (e.kind == Element::Kind::rule && !seen[e.index]) {
          seen[e.index] = 1;
          todo.push_back(e.index);
        }
  }
  return seen;
}

}  // namespace

void add_repeat_runs(const Grammar& g, ParserTables& t) {
  std::map<uint32_t, uint32_t> rules_index;                   // element rule -> index in t.run_element_rules
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> classes;  // (element, T) -> run class
  auto element_id = [](const Element& e) {
    return uint64_t{e.index} << 2 | (e.kind == Element::Kind::rule ? 2u : 0u) | (e.star ? 1u : 0u);
  };
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      const Alternative& alt = g.rules[r].alternatives[a];
      const uint32_t first = t.rule_starts[r][a];
      for (size_t d = 0; d < alt.size();) {
        Element base = alt[d];
        size_t m = 0, o = 0;
        if (!base.star && !optional_of(g, base))
          while (d + m < alt.size() && alt[d + m] == base) ++m;
        if (d + m < alt.size()) {
          const std::optional<Element> x = optional_of(g, alt[d + m]);
          if (x && (m == 0 || *x == base)) {
            base = *x;
            const Element opt = alt[d + m];
            while (d + m + o < alt.size() && alt[d + m + o] == opt) ++o;
          }
        }
        const size_t n = m + o;
        const size_t after = d + n;
        bool ok = n >= 2 && after < alt.size() && alt[after].kind == Element::Kind::bytes && !alt[after].star;
        uint32_t element_rules = RepeatRun::kNoRules;
        if (ok && base.kind == Element::Kind::rule) {
          auto [it, added] =
              rules_index.try_emplace(base.index, static_cast<uint32_t>(t.run_element_rules.size()));
          if (added) t.run_element_rules.push_back(reachable_rules(g, base.index));
          element_rules = it->second;
          // The run's own rule inside its element would make "inside a copy" and "after the run" overlap.
          if (t.run_element_rules[element_rules][r]) ok = false;
        }
        if (ok) {
          RepeatRun run;
          run.first_kind = first + static_cast<uint32_t>(d);
          run.n_copies = static_cast<uint32_t>(n);
          run.n_required = static_cast<uint32_t>(m);
          run.shadow_kind = static_cast<uint32_t>(t.kinds.size());
          run.element_rules = element_rules;
          run.run_class = classes
                              .try_emplace({element_id(base), element_id(alt[after])},
                                           static_cast<uint32_t>(classes.size()))
                              .first->second;
          Element star_base = base;
          star_base.star = true;
          Alternative shadow{star_base};
          shadow.insert(shadow.end(), alt.begin() + static_cast<std::ptrdiff_t>(after), alt.end());
          t.add_alternative_kinds(r, shadow);
          t.runs.push_back(run);
        }
        d += n > 0 ? n : 1;
      }
    }
  }
  t.n_run_classes = classes.size();
}

void derive_run_position(const RepeatRun& run, const RunMask& inside, const RunMask& exits, uint32_t k,
                         size_t words, std::vector<uint32_t>& accepted, std::vector<uint32_t>& escape_nodes) {
  accepted.assign(words, 0);
  escape_nodes.clear();
  // Codes repeat (a few dozen values): decide each once.
  std::vector<int8_t> allowed;
  auto test = [&](uint16_t code) {
    if (code >= allowed.size()) allowed.resize(size_t{code} + 1, -1);
    if (allowed[code] < 0) allowed[code] = run_code_allowed(run, k, code) ? 1 : 0;
    return allowed[code] == 1;
  };
  std::span<uint32_t> bits(accepted);
  for (const RunMask* m : {&inside, &exits}) {
    for (const RunMask::Token& t : m->tokens)
      if (test(t.code)) bitmask_set(bits, t.id);
    for (const RunMask::Node& e : m->escapes)
      if (test(e.code)) escape_nodes.push_back(e.node);
  }
  std::sort(escape_nodes.begin(), escape_nodes.end());
}

}  // namespace ds::grammar
