#include "grammar/gbnf_parser.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <string>

#include "grammar/grammar_builder.h"
#include "grammar/regex_compiler.h"

namespace ds::grammar {

namespace {

using Ranges = std::vector<CodepointRange>;

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits, bool lark)
      : t_(text), limits_(limits), b_(limits), lark_(lark) {}

  Result<Grammar> run() {
    rule_id(lark_ ? "start" : "root");  // rule 0
    skip_space(true);
    while (!at_end()) {
      DS_TRY(parse_rule());
      skip_space(true);
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_.count(name))
        return Status{ErrorCode::grammar_bad_input,
                      fmt::format("gbnf: rule '{}' is used but never defined", name)};
    }
    return b_.finish();
  }

 private:
  bool at_end() const { return pos_ >= t_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < t_.size() ? t_[pos_ + ahead] : '\0'; }

  Status error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return {ErrorCode::grammar_bad_input, fmt::format("gbnf: at {}:{}: {}", line, col, what)};
  }

  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#' || (lark_ && c == '/' && peek(1) == '/')) {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = b_.new_rule(name);
    ids_[name] = id;
    return id;
  }

  // "::=" in GBNF, ":" in Lark.
  size_t definition_length() const {
    if (lark_) return peek() == ':' ? 1 : 0;
    return t_.substr(pos_, 3) == "::=" ? 3 : 0;
  }

  Status parse_rule() {
    if (lark_ && peek() == '%')
      return {ErrorCode::grammar_unsupported,
              error("Lark directives (%import, %ignore, ...) are not supported").message()};
    if (lark_ && (peek() == '?' || peek() == '!')) ++pos_;  // inlining / keep-tokens marks: same language
    const std::string name = parse_name();
    if (name.empty()) return error("expected a rule name");
    skip_space(false);
    if (lark_ && peek() == '.')
      return {ErrorCode::grammar_unsupported, error("rule priorities are not supported").message()};
    const size_t def = definition_length();
    if (def == 0) return error(lark_ ? "expected ':'" : "expected '::='");
    pos_ += def;
    skip_space(true);  // the body may start on the next line
    if (defined_.count(name)) return error(fmt::format("rule '{}' is defined twice", name));
    defined_.insert({name, true});
    const uint32_t id = rule_id(name);
    DS_ASSIGN_OR_RETURN(std::vector<Alternative> alts, parse_alternatives(0));
    for (Alternative& a : alts) b_.add_alternative(id, std::move(a));
    return {};
  }

  // Top level (depth 0): a newline ends the rule unless the next line starts with '|'.
  Result<std::vector<Alternative>> parse_alternatives(size_t depth) {
    if (depth > limits_.max_nesting) return error("groups nested too deeply");
    std::vector<Alternative> alts;
    while (true) {
      DS_ASSIGN_OR_RETURN(Alternative seq, parse_sequence(depth));
      alts.push_back(std::move(seq));
      const size_t save = pos_;
      skip_space(true);
      if (peek() == '|') {
        ++pos_;
        continue;
      }
      if (depth == 0) pos_ = save;
      return alts;
    }
  }

  Result<Alternative> parse_sequence(size_t depth) {
    Alternative seq;
    skip_space(depth > 0);
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n' || c == '\r' || (lark_ && c == ']')) break;
      // A name followed by '::=' is the next rule (a missing newline is tolerated only at depth 0).
      Element atom{};
      if (lark_ && (c == '?' || c == '!') && depth == 0) {
        break;  // the next rule's mark
      }
      if (c == '"') {
        DS_ASSIGN_OR_RETURN(atom, parse_literal());
        if (lark_ && peek() == 'i')
          return Status{ErrorCode::grammar_unsupported, error("case-insensitive literals").message()};
      } else if (lark_ && c == '/') {
        DS_ASSIGN_OR_RETURN(atom, parse_lark_regex());
      } else if (lark_ && c == '[') {
        ++pos_;
        DS_ASSIGN_OR_RETURN(std::vector<Alternative> inner, parse_alternatives(depth + 1));
        skip_space(true);
        if (peek() != ']') return error("expected ']'");
        ++pos_;
        atom = b_.optional(b_.choice(std::move(inner), "group"));
      } else if (c == '[') {
        DS_ASSIGN_OR_RETURN(atom, parse_class());
      } else if (c == '.') {
        ++pos_;
        DS_ASSIGN_OR_RETURN(atom, b_.char_class({{0, 0x10FFFF}}));
      } else if (c == '(') {
        ++pos_;
        DS_ASSIGN_OR_RETURN(std::vector<Alternative> inner, parse_alternatives(depth + 1));
        skip_space(true);
        if (peek() != ')') return error("expected ')'");
        ++pos_;
        atom = b_.choice(std::move(inner), "group");
      } else if (is_name_char(c)) {
        const size_t save = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (definition_length() > 0) {
          pos_ = save;
          if (depth == 0) break;
          return error("a rule definition inside a group");
        }
        pos_ = save + name.size();
        atom = GrammarBuilder::ref(rule_id(name));
      } else {
        return error(fmt::format("unexpected character '{}'", c));
      }
      DS_TRY(parse_repetition(seq, atom));
      skip_space(depth > 0);
    }
    return seq;
  }

  Result<int64_t> parse_int() {
    const size_t start = pos_;
    int64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1'000'000'000) return error("repetition bound too large");
      ++pos_;
    }
    if (pos_ == start) return error("expected a number");
    return v;
  }

  Status parse_repetition(Alternative& seq, Element atom) {
    while (!at_end()) {
      if (lark_) {  // Lark writes "x ~ 3" with spaces
        const size_t save = pos_;
        skip_space(false);
        if (peek() != '~') pos_ = save;
      }
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
      } else if (lark_ && c == '~') {
        ++pos_;
        skip_space(false);
        DS_ASSIGN_OR_RETURN(min, parse_int());
        max = min;
        if (t_.substr(pos_, 2) == "..") {
          pos_ += 2;
          DS_ASSIGN_OR_RETURN(max, parse_int());
        }
      } else if (!lark_ && c == '{') {
        ++pos_;
        skip_space(false);
        DS_ASSIGN_OR_RETURN(min, parse_int());
        skip_space(false);
        max = min;
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          max = -1;
          if (peek() != '}') {
            DS_ASSIGN_OR_RETURN(max, parse_int());
          }
          skip_space(false);
        }
        if (peek() != '}') return error("expected '}'");
        ++pos_;
      } else {
        break;
      }
      Alternative rep;
      Status st = b_.append_repeat(rep, atom, min, max);
      if (!st.ok()) return Status{st.code(), error(st.message()).message()};
      atom = rep.size() == 1 ? rep[0] : b_.choice({rep}, "rep");
    }
    seq.push_back(atom);
    return {};
  }

  Result<uint32_t> parse_hex(size_t n) {
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      const char c = peek();
      if (!std::isxdigit(static_cast<unsigned char>(c))) return error("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class (after escapes), as a codepoint.
  Result<uint32_t> parse_char() {
    if (at_end()) return error("unexpected end");
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case '\\':
          return uint32_t{'\\'};
        case '"':
          return uint32_t{'"'};
        case ']':
          return uint32_t{']'};
        case '[':
          return uint32_t{'['};
        case '-':
          return uint32_t{'-'};
        case '^':
          return uint32_t{'^'};
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        default:
          --pos_;
          return error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const auto b0 = static_cast<uint8_t>(peek());
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > t_.size()) return error("invalid UTF-8");
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i)
      cp = (cp << 6) | (static_cast<uint8_t>(t_[pos_ + static_cast<size_t>(i)]) & 0x3F);
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Lark /regex/flags: the regex compiler's subset; flags are not supported.
  Result<Element> parse_lark_regex() {
    ++pos_;  // '/'
    std::string pattern;
    while (true) {
      if (at_end() || peek() == '\n') return error("unterminated /regex/");
      if (peek() == '/') break;
      if (peek() == '\\' && peek(1) == '/') {
        pattern += '/';
        pos_ += 2;
        continue;
      }
      if (peek() == '\\') pattern += t_[pos_++];
      pattern += t_[pos_++];
    }
    ++pos_;
    if (!at_end() && std::isalpha(static_cast<unsigned char>(peek())))
      return Status{ErrorCode::grammar_unsupported, error("regex flags").message()};
    Result<Element> e = add_regex(b_, pattern, limits_);
    if (!e.ok()) return Status{e.status().code(), error(e.status().message()).message()};
    return e;
  }

  Result<Element> parse_literal() {
    ++pos_;  // '"'
    std::string bytes;
    while (true) {
      if (at_end() || peek() == '\n') return error("unterminated string literal");
      if (peek() == '"') break;
      DS_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
      if (cp > 0x10FFFF) return error("codepoint out of range");
      put_utf8(bytes, cp);
    }
    ++pos_;
    return b_.literal(bytes);
  }

  Result<Element> parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges ranges;
    while (true) {
      if (at_end() || peek() == '\n') return error("unterminated character class");
      if (peek() == ']') break;
      DS_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        DS_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error("class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    Result<Element> e = b_.char_class(negate ? complement_ranges(ranges) : ranges);
    if (!e.ok()) return error(e.status().message());
    return e;
  }

  std::string_view t_;
  const GrammarLimits& limits_;
  GrammarBuilder b_;
  bool lark_ = false;
  size_t pos_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, bool> defined_;
};

}  // namespace

Result<Grammar> compile_gbnf(std::string_view text, const GrammarLimits& limits) {
  GbnfParser p(text, limits, false);
  return p.run();
}

Result<Grammar> compile_lark(std::string_view text, const GrammarLimits& limits) {
  GbnfParser p(text, limits, true);
  return p.run();
}

Result<Grammar> compile_ebnf(std::string_view text, const GrammarLimits& limits) {
  return text.find("::=") != std::string_view::npos ? compile_gbnf(text, limits) : compile_lark(text, limits);
}

}  // namespace ds::grammar
