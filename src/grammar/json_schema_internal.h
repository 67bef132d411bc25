// The JSON Schema compiler's inside (json_schema_compiler.h is the interface): one SchemaCompiler per
// schema document, its methods split by concept over three files:
//   json_schema_compiler.cpp  entry points, keyword checks, $ref / allOf / anyOf / enum, type dispatch
//   json_schema_primitives.cpp  whitespace, strings, numbers, integers, any value / object, maps
//   json_schema_containers.cpp  objects with listed properties, arrays (items, prefixItems, bounds)
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema_compiler.h"

namespace ds::grammar::json_schema {

using json = nlohmann::ordered_json;

// A JSON pointer token for a key (RFC 6901: '~' -> "~0", '/' -> "~1").
std::string escape_pointer_token(const std::string& key);

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonSchemaOptions& options)
      : root_(root), o_(options), b_(options.limits), started_(std::chrono::steady_clock::now()) {}

  Result<Grammar> run();

  // The schema at a JSON pointer into the document ("" = the whole), $refs resolved against the whole.
  Result<Grammar> run_at(const std::string& pointer);

  Result<Grammar> run_any_object();

 private:
  static Status unsupported(const std::string& path, const std::string& keyword, std::string_view why = "");
  static Status bad(const std::string& path, std::string_view what);

  // --- schemas (json_schema_compiler.cpp) ---------------------------------------------------------
  Status check_budget(const std::string& path, size_t depth) const;
  Result<Element> compile(const json& s, const std::string& path, size_t depth);
  // Without "type", the keywords say which type the author meant; producing only that type narrows.
  static std::vector<std::string> infer_types(const json& s);
  Result<Element> compile_ref(const json& ref, const std::string& path, size_t depth);
  // allOf: merged into one schema when the parts only add properties/required or repeat equal keywords.
  Result<Element> compile_all_of(const json& s, const std::string& path, size_t depth);
  static bool json_has_type(const json& v, const std::string& t);
  Result<Element> compile_enum(const json& s, const std::set<std::string>& constraints,
                               const std::string& path);
  Result<Element> compile_typed(const json& s, const std::string& type, const std::string& path,
                                size_t depth);

  // --- whitespace, punctuation and primitive pieces (json_schema_primitives.cpp) --------------------
  void ws(Alternative& a);
  void punct(Alternative& a, char c);
  Element regex(std::string_view pattern);
  // One JSON string character: unescaped (no '"', '\\', controls) or an escape (no lone surrogates).
  Element string_char();
  Element plain_string();
  Element any_value();
  Element any_object();
  // { "key": value (, "key": value)* } with any keys.
  Alternative map_body(const Element& value);
  Result<Element> compile_integer(const json& s, const std::string& path);
  Result<int64_t> non_negative_int(const json& s, const char* key, const std::string& path);
  Result<Element> compile_string(const json& s, const std::string& path);

  // --- objects and arrays (json_schema_containers.cpp) -------------------------------------------
  Result<Element> compile_object(const json& s, const std::string& path, size_t depth);
  Result<Element> compile_array(const json& s, const std::string& path, size_t depth);

  // A rule per use, not shared: a rule with one parent completes without escaping the token cache
  // (ParserTables::sole_parent), so the digits of a number stay a cached state.
  Element number() { return regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?"); }

  const json& root_;
  JsonSchemaOptions o_;
  GrammarBuilder b_;
  std::chrono::steady_clock::time_point started_;
  std::map<std::string, uint32_t> ref_rules_;
  std::optional<uint32_t> ws_rule_, any_value_, any_object_;
  std::optional<Element> string_char_, plain_string_;
};

}  // namespace ds::grammar::json_schema
