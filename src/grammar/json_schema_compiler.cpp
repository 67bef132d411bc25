#include "grammar/json_schema_compiler.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "grammar/grammar_builder.h"
#include "grammar/json_formats.h"
#include "grammar/regex_compiler.h"

namespace ds::grammar {

namespace {

using json = nlohmann::ordered_json;

// Keywords that do not constrain the instance (draft 2020-12 annotations and identifiers).
const std::set<std::string> kAnnotations = {
    "title",      "description", "$schema",   "$id",     "$comment", "default",     "examples",
    "deprecated", "readOnly",    "writeOnly", "$anchor", "$defs",    "definitions", "$vocabulary"};
// Keywords the compiler enforces (per type where they apply). Anything else is an error.
const std::set<std::string> kEnforced = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "items",
                                         "prefixItems",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "minItems",
                                         "maxItems"};

std::string escape_pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// Items schemas up to this many grammar elements get a second copy for the first array element.
constexpr size_t kDuplicateItemsElements = 400;

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonSchemaOptions& options)
      : root_(root), o_(options), b_(options.limits), started_(std::chrono::steady_clock::now()) {}

  Result<Grammar> run() {
    const uint32_t top = b_.new_rule("root");
    DS_ASSIGN_OR_RETURN(Element e, compile(root_, "", 0));
    b_.add_alternative(top, {e});
    return b_.finish();
  }

  // The schema at a JSON pointer into the document ("" = the whole), $refs resolved against the whole.
  Result<Grammar> run_at(const std::string& pointer) {
    const json* node = nullptr;
    try {
      node = &root_.at(json::json_pointer(pointer));
    } catch (const std::exception&) {
      return bad(pointer, "the pointer does not resolve");
    }
    const uint32_t top = b_.new_rule("root");
    DS_ASSIGN_OR_RETURN(Element e, compile(*node, pointer, 0));
    b_.add_alternative(top, {e});
    return b_.finish();
  }

  Result<Grammar> run_any_object() {
    const uint32_t top = b_.new_rule("root");
    b_.add_alternative(top, {any_object()});
    return b_.finish();
  }

 private:
  static Status unsupported(const std::string& path, const std::string& keyword, std::string_view why = "") {
    return {ErrorCode::grammar_unsupported,
            fmt::format("json schema: keyword '{}' at '{}/{}' is not supported{}{}", keyword, path,
                        escape_pointer_token(keyword), why.empty() ? "" : ": ", why)};
  }
  static Status bad(const std::string& path, std::string_view what) {
    return {ErrorCode::grammar_bad_input,
            fmt::format("json schema: at '{}': {}", path.empty() ? "/" : path, what)};
  }

  // --- whitespace and punctuation -----------------------------------------------------------------
  void ws(Alternative& a) {
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
  void punct(Alternative& a, char c) {
    ws(a);
    a.push_back(b_.byte(static_cast<uint8_t>(c)));
    ws(a);
  }

  // --- primitive pieces --------------------------------------------------------------------------
  Element regex(std::string_view pattern) {
    Result<Element> e = add_regex(b_, pattern, o_.limits);
    return *e;  // internal patterns are known good
  }
  // A rule per use, not shared: a rule with one parent completes without escaping the token cache
  // (ParserTables::sole_parent), so the digits of a number stay a cached state.
  Element number() { return regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?"); }
  // One JSON string character: unescaped (no '"', '\\', controls) or an escape (no lone surrogates).
  Element string_char() {
    if (!string_char_) {
      const uint32_t r = b_.new_rule("str_char");
      b_.add_alternative(r, {*b_.char_class(complement_ranges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}))});
      b_.add_alternative(
          r, {regex("\\\\([\"\\\\/bfnrt]|u([0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))")});
      string_char_ = GrammarBuilder::ref(r);
    }
    return *string_char_;
  }
  Element plain_string() {
    if (!plain_string_) {
      const uint32_t r = b_.new_rule("string");
      b_.add_alternative(r, {b_.byte('"'), GrammarBuilder::star(string_char()), b_.byte('"')});
      plain_string_ = GrammarBuilder::ref(r);
    }
    return *plain_string_;
  }
  Element any_value() {
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
  Element any_object() {
    if (any_object_) return GrammarBuilder::ref(*any_object_);
    const uint32_t r = b_.new_rule("object");
    any_object_ = r;
    Alternative body = map_body(any_value());
    b_.add_alternative(r, body);
    return GrammarBuilder::ref(r);
  }
  // { "key": value (, "key": value)* } with any keys.
  Alternative map_body(const Element& value) {
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

  // --- schemas -----------------------------------------------------------------------------------
  Status check_budget(const std::string& path, size_t depth) const {
    if (depth > o_.limits.max_nesting)
      return {ErrorCode::grammar_too_large,
              fmt::format("json schema: nesting deeper than {} at '{}'", o_.limits.max_nesting, path)};
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
    if (ms > o_.limits.max_compile_ms)
      return {ErrorCode::grammar_too_large,
              fmt::format("json schema: compile time over the limit of {} ms", o_.limits.max_compile_ms)};
    return {};
  }

  Result<Element> compile(const json& s, const std::string& path, size_t depth) {
    DS_TRY(check_budget(path, depth));
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      return Status{ErrorCode::grammar_empty,
                    fmt::format("json schema: 'false' at '{}' matches nothing", path)};
    }
    if (!s.is_object()) return bad(path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kAnnotations.count(it.key()) && !kEnforced.count(it.key())) return unsupported(path, it.key());
    std::set<std::string> constraints;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (kEnforced.count(it.key())) constraints.insert(it.key());

    if (s.contains("$ref")) {
      if (constraints.size() > 1) return unsupported(path, "$ref", "next to other constraints");
      return compile_ref(s["$ref"], path, depth);
    }
    if (s.contains("allOf")) return compile_all_of(s, path, depth);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (constraints.size() > 1) return unsupported(path, key, "next to other constraints");
      const json& list = s[key];
      if (!list.is_array() || list.empty()) return bad(path + "/" + key, "must be a non-empty array");
      std::vector<Alternative> alts;
      Status last_empty;
      for (size_t i = 0; i < list.size(); ++i) {
        Result<Element> e = compile(list[i], fmt::format("{}/{}/{}", path, key, i), depth + 1);
        if (!e.ok()) {
          if (e.status().code() != ErrorCode::grammar_empty) return e.status();
          last_empty = e.status();  // an empty branch only drops out of the union
          continue;
        }
        alts.push_back({*e});
      }
      if (alts.empty()) return last_empty;
      return b_.choice(std::move(alts), "any_of");
    }
    if (s.contains("enum") || s.contains("const")) return compile_enum(s, constraints, path);

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array()) {
        for (const json& x : t) {
          if (!x.is_string()) return bad(path + "/type", "type names must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return bad(path + "/type", "must be a string or an array of strings");
      }
    } else {
      types = infer_types(s);
    }
    if (types.empty()) return any_value();
    std::vector<Alternative> alts;
    for (const std::string& t : types) {
      DS_ASSIGN_OR_RETURN(Element e, compile_typed(s, t, path, depth));
      alts.push_back({e});
    }
    if (alts.size() == 1) return alts[0][0];
    return b_.choice(std::move(alts), "types");
  }

  // Without "type", the keywords say which type the author meant; producing only that type narrows.
  static std::vector<std::string> infer_types(const json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return {"object"};
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
      if (s.contains(k)) return {"array"};
    for (const char* k : {"minLength", "maxLength", "pattern", "format"})
      if (s.contains(k)) return {"string"};
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return {"number"};
    return {};
  }

  Result<Element> compile_ref(const json& ref, const std::string& path, size_t depth) {
    if (!ref.is_string()) return bad(path + "/$ref", "must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#')
      return unsupported(path, "$ref", fmt::format("only local references ('#...'), got '{}'", target));
    if (auto it = ref_rules_.find(target); it != ref_rules_.end()) return GrammarBuilder::ref(it->second);
    const json* node = nullptr;
    try {
      node = &root_.at(json::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      return bad(path + "/$ref", fmt::format("'{}' does not resolve", target));
    }
    // The rule exists before its body so recursive references find it.
    const uint32_t r = b_.new_rule("ref");
    ref_rules_[target] = r;
    DS_ASSIGN_OR_RETURN(Element body, compile(*node, target.substr(1), depth + 1));
    b_.add_alternative(r, {body});
    return GrammarBuilder::ref(r);
  }

  // allOf: merged into one schema when the parts only add properties/required or repeat equal keywords.
  Result<Element> compile_all_of(const json& s, const std::string& path, size_t depth) {
    const json& parts = s["allOf"];
    if (!parts.is_array() || parts.empty()) return bad(path + "/allOf", "must be a non-empty array");
    json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < parts.size(); ++i) {
      const json& part = parts[i];
      const std::string ppath = fmt::format("{}/allOf/{}", path, i);
      if (!part.is_object()) return unsupported(path, "allOf", "parts must be object schemas");
      if (part.contains("$ref") || part.contains("allOf") || part.contains("anyOf") || part.contains("oneOf"))
        return unsupported(path, "allOf", fmt::format("part '{}' holds $ref or a combinator", ppath));
      for (auto it = part.begin(); it != part.end(); ++it) {
        const std::string& k = it.key();
        if (kAnnotations.count(k)) continue;
        if (!merged.contains(k)) {
          merged[k] = it.value();
        } else if (k == "properties" && merged[k].is_object() && it.value().is_object()) {
          for (auto p = it.value().begin(); p != it.value().end(); ++p) {
            if (merged[k].contains(p.key()) && merged[k][p.key()] != p.value())
              return unsupported(path, "allOf", fmt::format("property '{}' defined differently", p.key()));
            merged[k][p.key()] = p.value();
          }
        } else if (k == "required" && merged[k].is_array() && it.value().is_array()) {
          for (const json& r : it.value())
            if (std::find(merged[k].begin(), merged[k].end(), r) == merged[k].end()) merged[k].push_back(r);
        } else if (merged[k] != it.value()) {
          return unsupported(path, "allOf", fmt::format("keyword '{}' differs between parts", k));
        }
      }
    }
    return compile(merged, path, depth + 1);
  }

  static bool json_has_type(const json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer")
      return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    if (t == "object") return v.is_object();
    return false;
  }

  Result<Element> compile_enum(const json& s, const std::set<std::string>& constraints,
                               const std::string& path) {
    for (const std::string& k : constraints)
      if (k != "enum" && k != "const" && k != "type") return unsupported(path, k, "next to enum/const");
    std::vector<json> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return bad(path + "/enum", "must be an array");
      if (s.contains("const")) {
        if (std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end()) values.clear();
      } else {
        for (const json& v : s["enum"]) values.push_back(v);
      }
    }
    if (s.contains("type")) {
      std::vector<std::string> types;
      if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
      if (s["type"].is_array())
        for (const json& t : s["type"]) types.push_back(t.is_string() ? t.get<std::string>() : "");
      std::erase_if(values, [&](const json& v) {
        return std::none_of(types.begin(), types.end(),
                            [&](const std::string& t) { return json_has_type(v, t); });
      });
    }
    if (values.empty())
      return Status{ErrorCode::grammar_empty,
                    fmt::format("json schema: enum/const at '{}' allows no value", path)};
    std::vector<Alternative> alts;
    for (const json& v : values) {
      Alternative a;
      b_.append_literal(a, v.dump(-1, ' ', false, json::error_handler_t::replace));
      alts.push_back(std::move(a));
    }
    return b_.choice(std::move(alts), "enum");
  }

  Result<Element> compile_typed(const json& s, const std::string& type, const std::string& path,
                                size_t depth) {
    if (type == "null") return b_.literal("null");
    if (type == "boolean") return b_.choice({{b_.literal("true")}, {b_.literal("false")}}, "boolean");
    if (type == "integer") return compile_integer(s, path);
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) return unsupported(path, k, "bounds are enforced for integers only");
      return number();
    }
    if (type == "string") return compile_string(s, path);
    if (type == "object") return compile_object(s, path, depth);
    if (type == "array") return compile_array(s, path, depth);
    return bad(path + "/type", fmt::format("unknown type '{}'", type));
  }

  Result<Element> compile_integer(const json& s, const std::string& path) {
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

  Result<int64_t> non_negative_int(const json& s, const char* key, const std::string& path) {
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return bad(path + "/" + key, "must be a non-negative integer");
    return v.get<int64_t>();
  }

  Result<Element> compile_string(const json& s, const std::string& path) {
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

  Result<Element> compile_object(const json& s, const std::string& path, size_t depth) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return bad(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return bad(path + "/required", "must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return bad(path + "/required", "names must be strings");
        required.insert(r.get<std::string>());
      }
    }
    const json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool additional_false =
        additional != nullptr && additional->is_boolean() && !additional->get<bool>();
    // No listed properties: a map whose values follow additionalProperties (default: anything).
    if (props.empty() && required.empty()) {
      if (additional_false) return b_.literal("{}");
      Element value = any_value();
      if (additional != nullptr) {
        DS_ASSIGN_OR_RETURN(value, compile(*additional, path + "/additionalProperties", depth + 1));
      }
      return b_.choice({map_body(value)}, "map");
    }
    // Listed properties, in schema order; required names not listed come after them with the
    // additionalProperties schema (or any value). Extra keys are not generated: that narrows, and
    // keeps every key unique.
    struct Prop {
      std::string key;
      Element value;
      bool required;
    };
    std::vector<Prop> list;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const std::string ppath = path + "/properties/" + escape_pointer_token(it.key());
      Result<Element> v = compile(it.value(), ppath, depth + 1);
      if (!v.ok()) {
        // An optional property whose schema is empty is just never written.
        if (v.status().code() == ErrorCode::grammar_empty && !required.count(it.key())) continue;
        return v.status();
      }
      list.push_back({it.key(), *v, required.count(it.key()) > 0});
    }
    for (const std::string& r : required) {
      if (props.contains(r)) continue;
      if (additional_false)
        return Status{
            ErrorCode::grammar_empty,
            fmt::format("json schema: at '{}': required '{}' is not allowed by additionalProperties", path,
                        r)};
      Element v = any_value();
      if (additional != nullptr) {
        DS_ASSIGN_OR_RETURN(v, compile(*additional, path + "/additionalProperties", depth + 1));
      }
      list.push_back({r, v, true});
    }
    // rest[i][first]: the properties from i on; `first` = nothing written yet (no leading comma).
    const size_t n = list.size();
    std::vector<std::array<uint32_t, 2>> rest(n + 1);
    for (size_t i = 0; i <= n; ++i) rest[i] = {b_.new_rule("props"), b_.new_rule("props")};
    b_.add_alternative(rest[n][0], {});
    b_.add_alternative(rest[n][1], {});
    for (size_t i = n; i-- > 0;) {
      for (int first = 0; first < 2; ++first) {
        Alternative a;
        if (!first) punct(a, ',');
        b_.append_literal(a, json(list[i].key).dump(-1, ' ', false, json::error_handler_t::replace));
        punct(a, ':');
        a.push_back(list[i].value);
        a.push_back(GrammarBuilder::ref(rest[i + 1][0]));
        b_.add_alternative(rest[i][first], a);
        if (!list[i].required) b_.add_alternative(rest[i][first], {GrammarBuilder::ref(rest[i + 1][first])});
      }
    }
    Alternative obj{b_.byte('{')};
    ws(obj);
    obj.push_back(GrammarBuilder::ref(rest[0][1]));
    ws(obj);
    obj.push_back(b_.byte('}'));
    return b_.choice({obj}, "obj");
  }

  Result<Element> compile_array(const json& s, const std::string& path, size_t depth) {
    int64_t min = 0, max = -1;
    if (s.contains("minItems")) {
      DS_ASSIGN_OR_RETURN(min, non_negative_int(s, "minItems", path));
    }
    if (s.contains("maxItems")) {
      DS_ASSIGN_OR_RETURN(max, non_negative_int(s, "maxItems", path));
    }
    std::vector<Element> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return bad(path + "/prefixItems", "must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        DS_ASSIGN_OR_RETURN(
            Element e, compile(s["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i), depth + 1));
        prefix.push_back(e);
      }
    }
    std::optional<Element> item = any_value();
    // The items schema is compiled twice when it is small: once for the first element and once for
    // the others (after a comma), so each copy has one parent and the token cache walks through it
    // (ParserTables::sole_parent). A large one is shared.
    std::optional<Element> first_item;
    if (s.contains("items")) {
      const size_t before = b_.n_elements();
      Result<Element> e = compile(s["items"], path + "/items", depth + 1);
      if (e.ok()) {
        item = *e;
        if (b_.n_elements() - before <= kDuplicateItemsElements) {
          DS_ASSIGN_OR_RETURN(first_item, compile(s["items"], path + "/items", depth + 1));
        }
      } else if (e.status().code() == ErrorCode::grammar_empty) {
        item.reset();  // items: false (or an empty schema): only the prefix
      } else {
        return e.status();
      }
    }
    const auto n_prefix = static_cast<int64_t>(prefix.size());
    if (!item) max = max < 0 ? n_prefix : std::min(max, n_prefix);
    if (max >= 0 && max < min)
      return Status{ErrorCode::grammar_empty,
                    fmt::format("json schema: at '{}': no array length fits", path)};
    if (static_cast<uint64_t>(std::max(min, max)) > o_.limits.max_repeat)
      return Status{
          ErrorCode::grammar_too_large,
          fmt::format("json schema: at '{}': item bounds over the limit {}", path, o_.limits.max_repeat)};
    Alternative sep_alt;
    punct(sep_alt, ',');
    const Element sep = b_.choice({sep_alt}, "comma");
    // tail(j, first): elements from position j on (j <= n_prefix), then the repeated items.
    const uint32_t items_tail = b_.new_rule("items");
    const uint32_t items_tail_first = b_.new_rule("items");
    const int64_t extra_min = std::max<int64_t>(0, min - n_prefix);
    const int64_t extra_max = max < 0 ? -1 : std::max<int64_t>(0, max - n_prefix);
    if (item && extra_max != 0) {
      // With a leading comma (after some prefix element) and without (nothing written yet).
      Alternative with_comma, without;
      const uint32_t one = b_.new_rule("item");
      b_.add_alternative(one, {sep, *item});
      DS_TRY(b_.append_repeat(with_comma, GrammarBuilder::ref(one), extra_min, extra_max));
      Alternative body{first_item.value_or(*item)};
      DS_TRY(b_.append_repeat(body, GrammarBuilder::ref(one), std::max<int64_t>(0, extra_min - 1),
                              extra_max < 0 ? -1 : extra_max - 1));
      if (extra_min > 0) {
        without = std::move(body);
      } else {
        without.push_back(b_.optional(b_.choice({body}, "seq")));
      }
      b_.add_alternative(items_tail, with_comma);
      b_.add_alternative(items_tail_first, without);
    } else {
      b_.add_alternative(items_tail, {});
      b_.add_alternative(items_tail_first, {});
    }
    uint32_t next_rest = items_tail;
    uint32_t next_first = items_tail_first;
    for (int64_t j = n_prefix; j-- > 0;) {
      const uint32_t r_rest = b_.new_rule("tuple");
      const uint32_t r_first = b_.new_rule("tuple");
      b_.add_alternative(r_rest, {sep, prefix[static_cast<size_t>(j)], GrammarBuilder::ref(next_rest)});
      b_.add_alternative(r_first, {prefix[static_cast<size_t>(j)], GrammarBuilder::ref(next_rest)});
      if (j >= min) {  // the array may stop before element j
        b_.add_alternative(r_rest, {});
        b_.add_alternative(r_first, {});
      }
      next_rest = r_rest;
      next_first = r_first;
    }
    Alternative arr{b_.byte('[')};
    ws(arr);
    arr.push_back(GrammarBuilder::ref(next_first));
    ws(arr);
    arr.push_back(b_.byte(']'));
    return b_.choice({arr}, "array");
  }

  const json& root_;
  JsonSchemaOptions o_;
  GrammarBuilder b_;
  std::chrono::steady_clock::time_point started_;
  std::map<std::string, uint32_t> ref_rules_;
  std::optional<uint32_t> ws_rule_, any_value_, any_object_;
  std::optional<Element> string_char_, plain_string_;
};

}  // namespace

Result<Grammar> compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  return compile_json_schema_at(schema_json, "", options);
}

Result<Grammar> compile_json_schema_at(std::string_view schema_json, const std::string& pointer,
                                       const JsonSchemaOptions& options) {
  json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers that overflow
    return Status{ErrorCode::grammar_bad_input, fmt::format("json schema: not JSON: {}", e.what())};
  }
  SchemaCompiler c(schema, options);
  return pointer.empty() ? c.run() : c.run_at(pointer);
}

Result<Grammar> compile_any_json_object(const JsonSchemaOptions& options) {
  const json none = json::object();
  SchemaCompiler c(none, options);
  return c.run_any_object();
}

}  // namespace ds::grammar
