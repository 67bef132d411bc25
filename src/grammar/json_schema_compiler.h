// JSON Schema (the draft 2020-12 subset of docs/grammar.md) -> the byte CFG. Every keyword is either
// enforced, a pure annotation (title, description, ...), or an error naming the keyword and its JSON
// path: a schema is never silently loosened. Where the compiler narrows (properties in schema order,
// no extra properties next to listed ones, full-match patterns), every output still validates.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace ds::grammar {

struct JsonSchemaOptions {
  // false: compact JSON ({"a":1,"b":[2]}); true: up to max_whitespace of [ \t\n] around separators.
  bool flexible_whitespace = false;
  int32_t max_whitespace = 8;
  GrammarLimits limits;
};

// `schema_json` is the schema's JSON text. Errors: grammar_bad_input (not JSON, wrong keyword type,
// bad $ref), grammar_unsupported (keyword named with its path), grammar_too_large, grammar_empty.
Result<Grammar> compile_json_schema(std::string_view schema_json, const JsonSchemaOptions& options = {});

// The sub-schema at a JSON pointer ("/properties/city"), its $refs resolved against the whole document
// (a tool's parameter, dsml_tool_grammar.h). Errors name paths from the document's root.
Result<Grammar> compile_json_schema_at(std::string_view schema_json, const std::string& pointer,
                                       const JsonSchemaOptions& options = {});

// Any JSON object (the API's response_format json_object).
Result<Grammar> compile_any_json_object(const JsonSchemaOptions& options = {});

}  // namespace ds::grammar
