#include "recipe/request_error.h"

#include <fmt/format.h>

namespace ds::recipe {

Status field_error(std::string_view path, std::string_view message, ErrorCode code) {
  if (path.empty()) return Status(code, std::string(message));
  return Status(code, fmt::format("{}: {}", path, message));
}

Status unsupported_error(std::string_view path, std::string_view message) {
  return field_error(path, message, kUnsupported);
}

std::string error_field_path(const Status& status) {
  const std::string& msg = status.message();
  const size_t colon = msg.find(": ");
  if (colon == std::string::npos) return {};
  const std::string_view head(msg.data(), colon);
  // A path is an identifier chain with [i] indices; anything else (a sentence) is not a path.
  for (char c : head) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '[' || c == ']';
    if (!ok) return {};
  }
  return std::string(head);
}

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string index_path(std::string_view parent, size_t index) { return fmt::format("{}[{}]", parent, index); }

}  // namespace ds::recipe
