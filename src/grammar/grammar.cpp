#include "grammar/grammar.h"

#include <fmt/format.h>

#include <vector>

namespace ds::grammar {

size_t Grammar::n_elements() const {
  size_t n = 0;
  for (const Rule& r : rules)
    for (const Alternative& a : r.alternatives) n += a.size();
  return n;
}

Status Grammar::prune_unproductive() {
  // A rule is productive when some alternative derives a finite byte string: every element is a byte
  // set, a star, or a productive rule. Fixpoint, then alternatives that need an unproductive rule go.
  std::vector<uint8_t> productive(rules.size(), 0);
  auto alt_ok = [&](const Alternative& a) {
    for (const Element& e : a)
      if (!e.star && e.kind == Element::Kind::rule && !productive[e.index]) return false;
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const Alternative& a : rules[r].alternatives)
        if (alt_ok(a)) {
          productive[r] = 1;
          changed = true;
          break;
        }
    }
  }
  if (rules.empty() || !productive[0])
    return {ErrorCode::grammar_empty, "the grammar's language is empty (no finite output completes it)"};
  for (Rule& rule : rules) {
    std::erase_if(rule.alternatives, [&](const Alternative& a) { return !alt_ok(a); });
    for (Alternative& a : rule.alternatives)
      std::erase_if(a, [&](const Element& e) {
        return e.star && e.kind == Element::Kind::rule && !productive[e.index];
      });
  }
  return {};
}

Status Grammar::validate() const {
  if (rules.empty()) return {ErrorCode::internal, "grammar has no rules"};
  for (size_t r = 0; r < rules.size(); ++r) {
    if (r == 0 && rules[r].alternatives.empty())
      return {ErrorCode::internal, fmt::format("grammar rule '{}' has no alternatives", rules[r].name)};
    for (const Alternative& a : rules[r].alternatives)
      for (const Element& e : a) {
        const size_t limit = e.kind == Element::Kind::bytes ? byte_sets.size() : rules.size();
        if (e.index >= limit)
          return {ErrorCode::internal,
                  fmt::format("grammar rule '{}' refers to index {} out of range", rules[r].name, e.index)};
      }
  }
  return {};
}

namespace {
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;
void mix(uint64_t& h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= kFnvPrime;
  }
}
}  // namespace

uint64_t Grammar::hash() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  mix(h, rules.size());
  for (const Rule& r : rules) {
    mix(h, r.alternatives.size());
    for (const Alternative& a : r.alternatives) {
      mix(h, a.size());
      for (const Element& e : a)
        mix(h, (uint64_t{e.index} << 2) | (uint64_t{e.star} << 1) | uint64_t(e.kind));
    }
  }
  mix(h, byte_sets.size());
  for (const ByteSet& s : byte_sets)
    for (uint64_t w : s.words) mix(h, w);
  return h;
}

namespace {
std::string byte_set_text(const ByteSet& s) {
  std::string out = "[";
  auto put = [&](int b) {
    if (b >= 0x21 && b < 0x7f && b != ']' && b != '\\' && b != '-' && b != '^')
      out += static_cast<char>(b);
    else
      out += fmt::format("\\x{:02X}", b);
  };
  for (int b = 0; b < 256;) {
    if (!s.contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.contains(static_cast<uint8_t>(e + 1))) ++e;
    put(b);
    if (e > b) {
      out += '-';
      put(e);
    }
    b = e + 1;
  }
  return out + "]";
}
}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (const Rule& r : rules) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      if (r.alternatives[a].empty()) out += " \"\"";
      for (const Element& e : r.alternatives[a]) {
        out += ' ';
        out += e.kind == Element::Kind::bytes ? byte_set_text(byte_sets[e.index]) : rules[e.index].name;
        if (e.star) out += '*';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace ds::grammar
