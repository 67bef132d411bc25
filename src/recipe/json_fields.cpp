#include "recipe/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "recipe/request_error.h"

namespace ds::recipe {

Result<Json> parse_request_body(std::string_view body) {
  Json parsed = Json::parse(body.begin(), body.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return field_error("body", "invalid JSON");
  if (!parsed.is_object())
    return field_error("body", fmt::format("expected object, got {}", json_type_name(parsed)));
  return parsed;
}

Result<Json> parse_embedded_json(std::string_view text, const std::string& path) {
  Json parsed = Json::parse(text.begin(), text.end(), nullptr, false);
  if (parsed.is_discarded()) return field_error(path, "invalid JSON text");
  return parsed;
}

void append_json_escaped(std::string& out, std::string_view bytes) {
  for (const char c : bytes) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<uint8_t>(c)));
        } else {
          out += c;
        }
    }
  }
}

namespace {

void append_python_string(std::string& out, const std::string& s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void append_python_json(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_python_string(out, key);
        out += ": ";
        append_python_json(out, item);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& item : v) {
        if (!first) out += ", ";
        first = false;
        append_python_json(out, item);
      }
      out += ']';
      return;
    }
    case Json::value_t::string:
      append_python_string(out, v.get_ref<const std::string&>());
      return;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      // Python writes non-finite floats as bare words; nlohmann would write null.
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += v.dump();  // shortest round-trip, "1.0" for integral values, as Python's repr
      }
      return;
    }
    default:
      out += v.dump();  // null, booleans, integers
  }
}

}  // namespace

std::string python_json_dumps(const Json& value) {
  std::string out;
  append_python_json(out, value);
  return out;
}

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "number";
    default:
      return "unknown";
  }
}

const Json* find_field(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {
Status wrong_type(std::string_view path, std::string_view key, const char* expected, const Json& got) {
  return field_error(join_path(path, key), fmt::format("expected {}, got {}", expected, json_type_name(got)));
}
}  // namespace

Result<std::optional<std::string>> read_string(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(path, key, "string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<bool>> read_bool(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return wrong_type(path, key, "boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<double>> read_number(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return wrong_type(path, key, "number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) return field_error(join_path(path, key), "expected a finite number");
  return std::optional<double>(d);
}

Result<std::optional<int64_t>> read_integer(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return field_error(join_path(path, key), "must be below 2^63");
    return std::optional<int64_t>(static_cast<int64_t>(u));
  }
  if (v->is_number_integer()) return std::optional<int64_t>(v->get<int64_t>());
  if (v->is_number_float()) {
    // 100.0 is an integer in JSON's number model; 1.5 is not.
    const double d = v->get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18)
      return std::optional<int64_t>(static_cast<int64_t>(d));
  }
  return wrong_type(path, key, "integer", *v);
}

Result<const Json*> read_object(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return field_error(join_path(path, key), "required");
  if (!v->is_object()) return wrong_type(path, key, "object", *v);
  return v;
}

Result<const Json*> read_array(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return field_error(join_path(path, key), "required");
  if (!v->is_array()) return wrong_type(path, key, "array", *v);
  return v;
}

}  // namespace ds::recipe
