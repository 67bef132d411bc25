// Typed, path-aware reads of request JSON. Every getter names the field's full path in its error,
// and absent and null fields are treated alike (OpenAI clients send explicit nulls for defaults).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ds::recipe {

// ordered_json keeps the client's key order, which the prompt encodings reproduce.
using Json = nlohmann::ordered_json;

// The request body; "body: invalid JSON ..." when it does not parse or is not an object.
Result<Json> parse_request_body(std::string_view body);
// JSON text embedded in a request (tool-call arguments); `path` names it in the error.
Result<Json> parse_embedded_json(std::string_view text, const std::string& path);

// Serialization as Python's json.dumps(value, ensure_ascii=False) writes it: ", " and ": "
// separators, non-ASCII kept raw. The DeepSeek encodings render schemas and arguments this way.
std::string python_json_dumps(const Json& value);
// Appends `bytes` as they appear inside a JSON string literal, without the quotes: ", \ and control
// characters escaped, everything else (non-ASCII UTF-8 included) kept raw, as json.dumps(ensure_ascii=False).
void append_json_escaped(std::string& out, std::string_view bytes);

// Field readers. `obj` must be an object; `path` is the object's own path ("" for the body).
const Json* find_field(const Json& obj, std::string_view key);  // nullptr when absent or null
Result<std::optional<std::string>> read_string(const Json& obj, std::string_view key, std::string_view path);
Result<std::optional<bool>> read_bool(const Json& obj, std::string_view key, std::string_view path);
Result<std::optional<double>> read_number(const Json& obj, std::string_view key, std::string_view path);
Result<std::optional<int64_t>> read_integer(const Json& obj, std::string_view key, std::string_view path);
// A present, non-null field that must be an object / array.
Result<const Json*> read_object(const Json& obj, std::string_view key, std::string_view path);
Result<const Json*> read_array(const Json& obj, std::string_view key, std::string_view path);

// "string", "number", "object", ... for "expected X, got Y" messages.
const char* json_type_name(const Json& value);

}  // namespace ds::recipe
