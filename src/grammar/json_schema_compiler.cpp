#include "grammar/json_schema_compiler.h"

#include <fmt/format.h>

#include "grammar/json_schema_internal.h"

namespace ds::grammar::json_schema {

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

Result<Grammar> SchemaCompiler::run() {
  const uint32_t top = b_.new_rule("root");
  DS_ASSIGN_OR_RETURN(Element e, compile(root_, "", 0));
  b_.add_alternative(top, {e});
  return b_.finish();
}

Result<Grammar> SchemaCompiler::run_at(const std::string& pointer) {
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

Result<Grammar> SchemaCompiler::run_any_object() {
  const uint32_t top = b_.new_rule("root");
  b_.add_alternative(top, {any_object()});
  return b_.finish();
}

Status SchemaCompiler::unsupported(const std::string& path, const std::string& keyword,
                                   std::string_view why) {
  return {ErrorCode::grammar_unsupported,
          fmt::format("json schema: keyword '{}' at '{}/{}' is not supported{}{}", keyword, path,
                      escape_pointer_token(keyword), why.empty() ? "" : ": ", why)};
}

Status SchemaCompiler::bad(const std::string& path, std::string_view what) {
  return {ErrorCode::grammar_bad_input,
          fmt::format("json schema: at '{}': {}", path.empty() ? "/" : path, what)};
}

// --- schemas -----------------------------------------------------------------------------------
Status SchemaCompiler::check_budget(const std::string& path, size_t depth) const {
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

Result<Element> SchemaCompiler::compile(const json& s, const std::string& path, size_t depth) {
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
std::vector<std::string> SchemaCompiler::infer_types(const json& s) {
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

Result<Element> SchemaCompiler::compile_ref(const json& ref, const std::string& path, size_t depth) {
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
Result<Element> SchemaCompiler::compile_all_of(const json& s, const std::string& path, size_t depth) {
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

bool SchemaCompiler::json_has_type(const json& v, const std::string& t) {
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

Result<Element> SchemaCompiler::compile_enum(const json& s, const std::set<std::string>& constraints,
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

Result<Element> SchemaCompiler::compile_typed(const json& s, const std::string& type, const std::string& path,
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

}  // namespace ds::grammar::json_schema

namespace ds::grammar {

using json_schema::json;
using json_schema::SchemaCompiler;

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
