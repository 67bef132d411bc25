#include <fmt/format.h>

#include "grammar/json_formats.h"
#include "grammar/json_schema_internal.h"
#include "grammar/regex_compiler.h"

namespace ds::grammar::json_schema {

// --- whitespace and punctuation -----------------------------------------------------------------
void SchemaCompiler::ws(Alternative& a) {
  if (!o_.flexible_whitespace) return;
  if (!ws_rule_) {
    const uint32_t r = b_.new_rule("ws");
    Alternative body;
    ByteSet set;
    set.add(' ');
    set.add('\t');
    set.add('\n');
    if (!b_.append_repeat(body, b_.bytes(set), 0, o_.max_whitespace).ok()) body.clear();
    b_.add_alternative(r, body);
    ws_rule_ = r;
  }
  a.push_back(GrammarBuilder::ref(*ws_rule_));
}

void SchemaCompiler::punct(Alternative& a, char c) {
  ws(a);
  a.push_back(b_.byte(static_cast<uint8_t>(c)));
  ws(a);
}

// --- primitive pieces --------------------------------------------------------------------------
Element SchemaCompiler::regex(std::string_view pattern) {
  Result<Element> e = add_regex(b_, pattern, o_.limits);
  return *e;  // internal patterns are known good
}

// One JSON string character: unescaped (no '"', '\\', controls) or an escape (no lone surrogates).
Element SchemaCompiler::string_char() {
  if (!string_char_) {
    const uint32_t r = b_.new_rule("str_char");
    b_.add_alternative(r, {*b_.char_class(complement_ranges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}))});
    b_.add_alternative(
        r, {regex("\\\\([\"\\\\/bfnrt]|u([0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))")});
    string_char_ = GrammarBuilder::ref(r);
  }
  return *string_char_;
}

Element SchemaCompiler::plain_string() {
  if (!plain_string_) {
    const uint32_t r = b_.new_rule("string");
    b_.add_alternative(r, {b_.byte('"'), GrammarBuilder::star(string_char()), b_.byte('"')});
    plain_string_ = GrammarBuilder::ref(r);
  }
  return *plain_string_;
}

Element SchemaCompiler::any_value() {
  if (any_value_) return GrammarBuilder::ref(*any_value_);
  const uint32_t r = b_.new_rule("value");
  any_value_ = r;
  b_.add_alternative(r, {any_object()});
  const Element value = GrammarBuilder::ref(r);
  Alternative arr{b_.byte('[')};
  ws(arr);
  Alternative sep;
  punct(sep, ',');
  (void)b_.append_separated(arr, value, b_.choice({sep}, "comma"), 0, -1);
  ws(arr);
  arr.push_back(b_.byte(']'));
  b_.add_alternative(r, arr);
  b_.add_alternative(r, {plain_string()});
  b_.add_alternative(r, {number()});
  for (const char* lit : {"true", "false", "null"}) b_.add_alternative(r, {b_.literal(lit)});
  return value;
}

Element SchemaCompiler::any_object() {
  if (any_object_) return GrammarBuilder::ref(*any_object_);
  const uint32_t r = b_.new_rule("object");
  any_object_ = r;
  Alternative body = map_body(any_value());
  b_.add_alternative(r, body);
  return GrammarBuilder::ref(r);
}

// { "key": value (, "key": value)* } with any keys.
Alternative SchemaCompiler::map_body(const Element& value) {
  Alternative kv{plain_string()};
  punct(kv, ':');
  kv.push_back(value);
  Alternative sep;
  punct(sep, ',');
  Alternative obj{b_.byte('{')};
  ws(obj);
  (void)b_.append_separated(obj, b_.choice({kv}, "kv"), b_.choice({sep}, "comma"), 0, -1);
  ws(obj);
  obj.push_back(b_.byte('}'));
  return obj;
}

Result<Element> SchemaCompiler::compile_integer(const json& s, const std::string& path) {
  std::optional<int64_t> lo, hi;
  auto bound = [&](const char* key, bool upper, bool exclusive) -> Status {
    if (!s.contains(key)) return {};
    const json& v = s[key];
    if (!v.is_number()) return bad(path + "/" + key, "must be a number");
    const double d = v.get<double>();
    if (std::fabs(d) > 9.0e15) return unsupported(path, key, "bound beyond 9e15");
    int64_t b = static_cast<int64_t>(upper ? std::floor(d) : std::ceil(d));
    if (exclusive && static_cast<double>(b) == d) b += upper ? -1 : 1;
    if (upper)
      hi = hi ? std::min(*hi, b) : b;
    else
      lo = lo ? std::max(*lo, b) : b;
    return {};
  };
  DS_TRY(bound("minimum", false, false));
  DS_TRY(bound("exclusiveMinimum", false, true));
  DS_TRY(bound("maximum", true, false));
  DS_TRY(bound("exclusiveMaximum", true, true));
  if (lo && hi && *lo > *hi)
    return Status{ErrorCode::grammar_empty,
                  fmt::format("json schema: integer bounds at '{}' are empty", path)};
  if (!lo && !hi) return regex("-?(0|[1-9][0-9]*)");
  return regex(integer_range_regex(lo, hi));
}

Result<int64_t> SchemaCompiler::non_negative_int(const json& s, const char* key, const std::string& path) {
  const json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    return bad(path + "/" + key, "must be a non-negative integer");
  return v.get<int64_t>();
}

Result<Element> SchemaCompiler::compile_string(const json& s, const std::string& path) {
  const int n_kinds =
      s.contains("format") + s.contains("pattern") + (s.contains("minLength") || s.contains("maxLength"));
  if (n_kinds > 1)
    return unsupported(path, s.contains("format") ? "format" : "pattern",
                       "combined with another string constraint");
  Alternative a{b_.byte('"')};
  if (s.contains("format")) {
    if (!s["format"].is_string()) return bad(path + "/format", "must be a string");
    const std::string f = s["format"].get<std::string>();
    std::optional<std::string> re = format_regex(f);
    if (!re) return unsupported(path, "format", fmt::format("format '{}'", f));
    a.push_back(regex(*re));
  } else if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return bad(path + "/pattern", "must be a string");
    Result<Element> e = add_regex(b_, s["pattern"].get<std::string>(), o_.limits, true);
    if (!e.ok())
      return Status{e.status().code(),
                    fmt::format("json schema: at '{}/pattern': {}", path, e.status().message())};
    a.push_back(*e);
  } else {
    int64_t min = 0, max = -1;
    if (s.contains("minLength")) {
      DS_ASSIGN_OR_RETURN(min, non_negative_int(s, "minLength", path));
    }
    if (s.contains("maxLength")) {
      DS_ASSIGN_OR_RETURN(max, non_negative_int(s, "maxLength", path));
    }
    if (max >= 0 && max < min)
      return Status{ErrorCode::grammar_empty,
                    fmt::format("json schema: at '{}': maxLength < minLength", path)};
    Status st = b_.append_repeat(a, string_char(), min, max);
    if (!st.ok()) return Status{st.code(), fmt::format("json schema: at '{}': {}", path, st.message())};
  }
  a.push_back(b_.byte('"'));
  return b_.choice({a}, "str");
}

}  // namespace ds::grammar::json_schema
