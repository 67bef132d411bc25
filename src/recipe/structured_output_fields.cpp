#include "recipe/structured_output_fields.h"

#include <fmt/format.h>

#include "recipe/request_error.h"

namespace ds::recipe {

namespace {

// One constraint value at `path`: JSON (a schema object, or its text), a string (regex/grammar) or
// an array of strings (choice).
Status set_constraint(const Json& v, ResponseFormatKind kind, const std::string& path, ResponseFormat& out) {
  if (out.kind != ResponseFormatKind::text) {
    return field_error(path, fmt::format("only one output constraint per request ('{}' is already one)",
                                         out.field.empty() ? "response_format" : out.field));
  }
  out.kind = kind;
  out.field = path;
  switch (kind) {
    case ResponseFormatKind::json_schema:
      if (v.is_object() || v.is_boolean()) {
        out.schema_json = v.dump();
      } else if (v.is_string()) {
        out.schema_json = v.get<std::string>();  // vLLM accepts the schema as JSON text too
      } else {
        return field_error(path, fmt::format("expected a JSON Schema object, got {}", json_type_name(v)));
      }
      return ok_status();
    case ResponseFormatKind::regex:
    case ResponseFormatKind::grammar:
      if (!v.is_string()) return field_error(path, fmt::format("expected string, got {}", json_type_name(v)));
      out.pattern = v.get<std::string>();
      return ok_status();
    case ResponseFormatKind::choice:
      if (!v.is_array() || v.empty()) return field_error(path, "expected a non-empty array of strings");
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) return field_error(index_path(path, i), "expected string");
        out.choices.push_back(v[i].get<std::string>());
      }
      return ok_status();
    default:
      return field_error(path, "internal: not a constraint kind");
  }
}

}  // namespace

Status read_structured_output_fields(const Json& body, ResponseFormat& format) {
  if (format.kind != ResponseFormatKind::text && format.field.empty()) format.field = "response_format";
  struct Field {
    const char* key;
    ResponseFormatKind kind;
  };
  static constexpr Field kTopLevel[] = {
      {"guided_json", ResponseFormatKind::json_schema},
      {"guided_regex", ResponseFormatKind::regex},
      {"guided_grammar", ResponseFormatKind::grammar},
      {"guided_choice", ResponseFormatKind::choice},
      {"regex", ResponseFormatKind::regex},
      {"ebnf", ResponseFormatKind::grammar},
  };
  if (const Json* so = find_field(body, "structured_outputs"); so != nullptr) {
    if (!so->is_object()) return field_error("structured_outputs", "expected object");
    static constexpr Field kNested[] = {
        {"json", ResponseFormatKind::json_schema},
        {"regex", ResponseFormatKind::regex},
        {"grammar", ResponseFormatKind::grammar},
        {"choice", ResponseFormatKind::choice},
    };
    for (auto it = so->begin(); it != so->end(); ++it) {
      if (it.value().is_null()) continue;
      bool known = false;
      for (const Field& f : kNested) {
        if (it.key() != f.key) continue;
        known = true;
        DS_TRY(set_constraint(it.value(), f.kind, join_path("structured_outputs", f.key), format));
      }
      if (!known) {
        return unsupported_error(join_path("structured_outputs", it.key()),
                                 "not supported (json, regex, grammar and choice are)");
      }
    }
  }
  for (const Field& f : kTopLevel) {
    const Json* v = find_field(body, f.key);
    if (v != nullptr) DS_TRY(set_constraint(*v, f.kind, f.key, format));
  }
  return ok_status();
}

}  // namespace ds::recipe
