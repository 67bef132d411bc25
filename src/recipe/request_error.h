// Errors from request conversion: a Status whose message starts with the JSON path of the offending
// field ("messages[2].content: expected string or array"), so the server can fill OpenAI's `param`
// or Anthropic's message without re-parsing anything.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace ds::recipe {

// The client sent something invalid (HTTP 400).
inline constexpr ErrorCode kInvalidRequest = ErrorCode::recipe_bad_request;
// Well-formed but not supported by this server or this model's encoding (also a client error, 400).
inline constexpr ErrorCode kUnsupported = ErrorCode::recipe_unsupported;

// "PATH: MESSAGE"; an empty path gives just MESSAGE (errors about the request as a whole).
Status field_error(std::string_view path, std::string_view message, ErrorCode code = kInvalidRequest);
Status unsupported_error(std::string_view path, std::string_view message);

// The path part of a field_error's message ("" when the error has none).
std::string error_field_path(const Status& status);

// Path building: join_path("messages[2]", "content") == "messages[2].content";
// index_path("messages", 2) == "messages[2]".
std::string join_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, size_t index);

}  // namespace ds::recipe
