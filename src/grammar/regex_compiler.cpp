#include "grammar/regex_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace ds::grammar {

namespace {

using Ranges = std::vector<CodepointRange>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, const GrammarLimits& limits, bool json_string_chars)
      : b_(b), p_(p), limits_(limits), json_string_chars_(json_string_chars) {}

  Result<Element> parse_all() {
    DS_ASSIGN_OR_RETURN(Element e, parse_alternation(0));
    if (pos_ < p_.size()) return error(ErrorCode::grammar_bad_input, "unbalanced ')'");
    return e;
  }

 private:
  Status error(ErrorCode code, std::string_view what) const {
    return {code, fmt::format("regex: at offset {}: {}", pos_, what)};
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  Result<Element> parse_alternation(size_t depth) {
    if (depth > limits_.max_nesting) return error(ErrorCode::grammar_too_large, "groups nested too deeply");
    std::vector<Alternative> alts;
    while (true) {
      DS_ASSIGN_OR_RETURN(Alternative seq, parse_sequence(depth));
      alts.push_back(std::move(seq));
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
    return b_.choice(std::move(alts), "re");
  }

  Result<Alternative> parse_sequence(size_t depth) {
    Alternative seq;
    const size_t start = pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const char c = peek();
      if (c == '^') {
        if (depth != 0 || pos_ != start) return error(ErrorCode::grammar_unsupported, "'^' not at the start");
        ++pos_;
        continue;
      }
      if (c == '$') {
        ++pos_;
        if (depth != 0 || !(at_end() || peek() == '|'))
          return error(ErrorCode::grammar_unsupported, "'$' not at the end");
        continue;
      }
      DS_ASSIGN_OR_RETURN(Element atom, parse_atom(depth));
      DS_TRY(parse_quantifiers(seq, atom));
    }
    return seq;
  }

  Result<int64_t> parse_int() {
    int64_t v = 0;
    const size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1'000'000'000) return error(ErrorCode::grammar_too_large, "repetition bound too large");
      ++pos_;
    }
    if (pos_ == start) return error(ErrorCode::grammar_bad_input, "expected a number in {}");
    return v;
  }

  // Quantifiers bind to the atom; several in a row ("a{2}?" lazy, "a**") apply in turn.
  Status parse_quantifiers(Alternative& seq, Element atom) {
    bool quantified = false;
    Alternative last;  // the last quantifier's elements (inlined when no quantifier follows)
    while (!at_end()) {
      const char c = peek();
      int64_t min = 0, max = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{' && pos_ + 1 < p_.size() && p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '9') {
        ++pos_;
        DS_ASSIGN_OR_RETURN(min, parse_int());
        max = min;
        if (!at_end() && peek() == ',') {
          ++pos_;
          max = -1;
          if (!at_end() && peek() != '}') {
            DS_ASSIGN_OR_RETURN(max, parse_int());
          }
        }
        if (at_end() || peek() != '}') return error(ErrorCode::grammar_bad_input, "unterminated {m,n}");
        ++pos_;
      } else {
        break;
      }
      if (quantified) {
        if (c == '?') continue;  // lazy: the same language under full-match semantics
        if (c == '+') return error(ErrorCode::grammar_unsupported, "possessive quantifier");
      }
      Alternative rep;
      DS_TRY(b_.append_repeat(rep, atom, min, max));
      atom = rep.size() == 1 ? rep[0] : b_.choice({rep}, "rep");
      last = std::move(rep);
      quantified = true;
    }
    // The outermost repeat's copies go straight into the sequence (same language): a bounded repeat
    // followed by a byte is then a repeat run (repeat_run.h) whose positions share one walk.
    if (last.size() > 1) {
      seq.insert(seq.end(), last.begin(), last.end());
      return {};
    }
    seq.push_back(atom);
    return {};
  }

  // One UTF-8 character of the pattern as a codepoint.
  Result<uint32_t> next_codepoint() {
    const auto b0 = static_cast<uint8_t>(p_[pos_]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > p_.size())
      return error(ErrorCode::grammar_bad_input, "invalid UTF-8");
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto bi = static_cast<uint8_t>(p_[pos_ + static_cast<size_t>(i)]);
      if ((bi & 0xC0) != 0x80) return error(ErrorCode::grammar_bad_input, "invalid UTF-8");
      cp = (cp << 6) | (bi & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  Result<uint32_t> parse_hex(size_t n_digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < n_digits; ++i) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek())))
        return error(ErrorCode::grammar_bad_input, "bad hex escape");
      const char c = peek();
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a class (\d ...) or a single codepoint, into `ranges`.
  Status parse_escape(Ranges& ranges) {
    if (at_end()) return error(ErrorCode::grammar_bad_input, "trailing backslash");
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        ranges.insert(ranges.end(), kDigit.begin(), kDigit.end());
        return {};
      case 'w':
        ranges.insert(ranges.end(), kWord.begin(), kWord.end());
        return {};
      case 's':
        ranges.insert(ranges.end(), kSpace.begin(), kSpace.end());
        return {};
      case 'D':
        for (auto r : complement_ranges(kDigit)) ranges.push_back(r);
        return {};
      case 'W':
        for (auto r : complement_ranges(kWord)) ranges.push_back(r);
        return {};
      case 'S':
        for (auto r : complement_ranges(kSpace)) ranges.push_back(r);
        return {};
      case 'n':
        ranges.push_back({'\n', '\n'});
        return {};
      case 'r':
        ranges.push_back({'\r', '\r'});
        return {};
      case 't':
        ranges.push_back({'\t', '\t'});
        return {};
      case 'f':
        ranges.push_back({'\f', '\f'});
        return {};
      case 'v':
        ranges.push_back({'\v', '\v'});
        return {};
      case '0':
        ranges.push_back({0, 0});
        return {};
      case 'x': {
        DS_ASSIGN_OR_RETURN(uint32_t v, parse_hex(2));
        ranges.push_back({v, v});
        return {};
      }
      case 'u': {
        uint32_t v = 0;
        if (!at_end() && peek() == '{') {
          ++pos_;
          size_t n = 0;
          while (!at_end() && peek() != '}' && n < 7) {
            DS_ASSIGN_OR_RETURN(uint32_t d, parse_hex(1));
            v = v * 16 + d;
            ++n;
          }
          if (at_end() || peek() != '}' || n == 0 || v > 0x10FFFF)
            return error(ErrorCode::grammar_bad_input, "bad \\u{...} escape");
          ++pos_;
        } else {
          DS_ASSIGN_OR_RETURN(v, parse_hex(4));
        }
        ranges.push_back({v, v});
        return {};
      }
      default:
        break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
      --pos_;
      return error(ErrorCode::grammar_unsupported, fmt::format("escape \\{}", c));
    }
    --pos_;
    DS_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
    ranges.push_back({cp, cp});
    return {};
  }

  Result<Element> parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (at_end()) return error(ErrorCode::grammar_bad_input, "unterminated character class");
      if (peek() == ']' && !first) break;
      if (p_.substr(pos_, 2) == "[:") return error(ErrorCode::grammar_unsupported, "POSIX class [:...:]");
      first = false;
      Ranges one;
      if (peek() == '\\') {
        ++pos_;
        DS_TRY(parse_escape(one));
      } else {
        DS_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
        one.push_back({cp, cp});
      }
      // A range a-b: both ends single characters; '-' before ']' is literal.
      if (one.size() == 1 && one[0].lo == one[0].hi && pos_ + 1 < p_.size() && peek() == '-' &&
          p_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi;
        if (peek() == '\\') {
          ++pos_;
          DS_TRY(parse_escape(hi));
        } else {
          DS_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
          hi.push_back({cp, cp});
        }
        if (hi.size() != 1 || hi[0].lo != hi[0].hi)
          return error(ErrorCode::grammar_bad_input, "bad class range");
        if (hi[0].lo < one[0].lo) return error(ErrorCode::grammar_bad_input, "class range out of order");
        one[0].hi = hi[0].lo;
      }
      ranges.insert(ranges.end(), one.begin(), one.end());
    }
    ++pos_;  // ']'
    return char_class(negate ? complement_ranges(ranges) : ranges);
  }

  Result<Element> parse_group(size_t depth) {
    ++pos_;  // '('
    if (!at_end() && peek() == '?') {
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (p_.substr(pos_, 3) == "?P<" ||
                 (p_.substr(pos_, 2) == "?<" && p_.substr(pos_, 3) != "?<=" && p_.substr(pos_, 3) != "?<!")) {
        const size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos)
          return error(ErrorCode::grammar_bad_input, "unterminated group name");
        pos_ = close + 1;
      } else {
        return error(ErrorCode::grammar_unsupported, "group modifier (lookaround, flags or atomic group)");
      }
    }
    DS_ASSIGN_OR_RETURN(Element inner, parse_alternation(depth + 1));
    if (at_end() || peek() != ')') return error(ErrorCode::grammar_bad_input, "missing ')'");
    ++pos_;
    return inner;
  }

  Result<Element> parse_atom(size_t depth) {
    const char c = peek();
    switch (c) {
      case '(':
        return parse_group(depth);
      case '[':
        return parse_class();
      case '.':
        ++pos_;
        return char_class(complement_ranges({{'\n', '\n'}}));
      case '*':
      case '+':
      case '?':
        return error(ErrorCode::grammar_bad_input, "quantifier without a target");
      case '\\': {
        ++pos_;
        Ranges r;
        DS_TRY(parse_escape(r));
        return char_class(r);
      }
      default: {
        DS_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
        return char_class({{cp, cp}});
      }
    }
  }

  // One character out of `ranges` (restricted to what a JSON string holds unescaped, if asked).
  Result<Element> char_class(const Ranges& ranges) {
    if (!json_string_chars_) return b_.char_class(ranges);
    Ranges banned = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    Ranges allowed = complement_ranges(banned);
    Ranges out;
    for (const CodepointRange& r : normalize_ranges(ranges))
      for (const CodepointRange& a : allowed) {
        const uint32_t lo = std::max(r.lo, a.lo), hi = std::min(r.hi, a.hi);
        if (lo <= hi) out.push_back({lo, hi});
      }
    if (out.empty()) return error(ErrorCode::grammar_unsupported, "a character a JSON string must escape");
    return b_.char_class(out);
  }

  GrammarBuilder& b_;
  std::string_view p_;
  const GrammarLimits& limits_;
  bool json_string_chars_ = false;
  size_t pos_ = 0;
};

}  // namespace

Result<Element> add_regex(GrammarBuilder& builder, std::string_view pattern, const GrammarLimits& limits,
                          bool json_string_chars) {
  RegexParser parser(builder, pattern, limits, json_string_chars);
  return parser.parse_all();
}

Result<Grammar> compile_regex(std::string_view pattern, const GrammarLimits& limits) {
  GrammarBuilder b(limits);
  const uint32_t root = b.new_rule("root");
  DS_ASSIGN_OR_RETURN(Element e, add_regex(b, pattern, limits));
  b.add_alternative(root, {e});
  return b.finish();
}

}  // namespace ds::grammar
