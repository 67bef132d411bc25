#include "recipe/request_error.h"

#include <fmt/format.h>

#include "base/field_path.h"

namespace ds::recipe {

Status field_error(std::string_view path, std::string_view message, ErrorCode code) {
  if (path.empty()) return Status(code, std::string(message));
  return Status(code, fmt::format("{}: {}", path, message));
}

Status unsupported_error(std::string_view path, std::string_view message) {
  return field_error(path, message, kUnsupported);
}

std::string error_field_path(const Status& status) { return status_field_path(status); }

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string index_path(std::string_view parent, size_t index) { return fmt::format("{}[{}]", parent, index); }

}  // namespace ds::recipe
