#include "tokenizer/regex_translation.h"

#include <fmt/format.h>

#include "tokenizer/unicode_delta.h"

namespace ds {
namespace {

// Unicode White_Space, as class members (no brackets).
constexpr const char* kWhiteSpaceMembers =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// "\p{X}" plus the newer ranges of X, as class members (no brackets).
std::string property_members(const std::string& name) {
  std::string out = "\\p{" + name + "}";
  if (name.size() == 1) {
    for (const CodepointRange& r : unicode_delta_ranges(name[0])) {
      out += r.first == r.last ? fmt::format("\\x{{{:X}}}", r.first)
                               : fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", r.first, r.last);
    }
  }
  return out;
}

}  // namespace

Result<std::string> translate_hf_regex(const std::string& pattern, const std::string& source,
                                       bool add_unicode_delta) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  size_t class_start = 0;  // index just after '[' or '[^' of the open class
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\') {
      if (!in_class && c == '[') {
        in_class = true;
        out += c;
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
        class_start = i + 1;
        continue;
      }
      // A ']' right after the opening is a literal member, not the end of the class.
      if (in_class && c == ']' && i != class_start) in_class = false;
      out += c;
      continue;
    }
    if (i + 1 >= pattern.size()) {
      out += c;
      break;
    }
    const char e = pattern[i + 1];
    if (e == 's' || e == 'S') {
      if (e == 'S' && in_class) {
        return Status(
            ErrorCode::tokenizer_bad_file,
            fmt::format("{}: pre_tokenizer regex {:?}: \\S inside a character class is not supported", source,
                        pattern));
      }
      if (in_class) {
        out += kWhiteSpaceMembers;
      } else {
        out += e == 's' ? "[" : "[^";
        out += kWhiteSpaceMembers;
        out += "]";
      }
      ++i;
      continue;
    }
    if (e == 'p' || e == 'P') {
      std::string name;
      size_t end;  // index of the last character of the escape
      if (i + 2 < pattern.size() && pattern[i + 2] == '{') {
        end = pattern.find('}', i + 3);
        if (end == std::string::npos) {
          return Status(ErrorCode::tokenizer_bad_file,
                        fmt::format("{}: pre_tokenizer regex {:?}: unterminated \\p{{", source, pattern));
        }
        name = pattern.substr(i + 3, end - (i + 3));
      } else if (i + 2 < pattern.size()) {
        end = i + 2;
        name = pattern.substr(i + 2, 1);
      } else {
        out += pattern.substr(i);
        break;
      }
      const bool has_delta = add_unicode_delta && name.size() == 1 && !unicode_delta_ranges(name[0]).empty();
      if (!has_delta) {
        out += pattern.substr(i, end + 1 - i);
      } else if (e == 'P' && in_class) {
        return Status(
            ErrorCode::tokenizer_bad_file,
            fmt::format("{}: pre_tokenizer regex {:?}: \\P{{..}} inside a character class is not supported",
                        source, pattern));
      } else if (in_class) {
        out += property_members(name);
      } else {
        out += e == 'p' ? "[" : "[^";
        out += property_members(name);
        out += "]";
      }
      i = end;
      continue;
    }
    out += c;
    out += e;
    ++i;
  }
  return out;
}

}  // namespace ds
