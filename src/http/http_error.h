// The one place where a Status becomes an HTTP status and an error body (ARCHITECTURE: "the only place
// errors become HTTP statuses"). Two body shapes, chosen by the route:
//   OpenAI:    {"error":{"message":"...","type":"...","param":"messages[0].content"|null,"code":"..."|null}}
//   Anthropic: {"type":"error","error":{"type":"...","message":"..."}}
// The same object is sent inside an SSE stream when an error happens after the 200 header went out.
// Bugs (ErrorKind::bug and codes the server does not know as user errors) become 500 with a fixed message:
// the real Status is logged with the request id, never sent (no internals leaked).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace ds::server {

enum class ErrorStyle { openai, anthropic };

struct HttpError {
  int http_status = 500;
  std::string type;       // API error type, e.g. "invalid_request_error" (style-specific)
  std::string message;    // safe to show to the client
  std::string param;      // offending field path ("" = null)
  std::string code;       // machine-readable code ("" = null), e.g. "engine_overloaded"
  int retry_after_s = 0;  // > 0: send a Retry-After header (429/503)
};

// Maps a non-ok Status to the HTTP error for `style`. `retry_after_s` is used for retryable errors.
HttpError http_error_from_status(const Status& status, ErrorStyle style, int retry_after_s);

// Errors the server itself raises before any handler runs.
HttpError not_found_error(ErrorStyle style, std::string_view method, std::string_view path);
HttpError method_not_allowed_error(ErrorStyle style, std::string_view method, std::string_view path);
HttpError unauthorized_error(ErrorStyle style);
HttpError forbidden_error(ErrorStyle style);  // 403: a valid client key on an admin route
HttpError payload_too_large_error(ErrorStyle style, size_t limit_bytes);
HttpError bad_http_error(ErrorStyle style, std::string_view why);
HttpError headers_too_large_error(ErrorStyle style);
HttpError internal_error(ErrorStyle style);
HttpError shutting_down_error(ErrorStyle style, int retry_after_s);

// The JSON error body in `style`.
std::string error_body(const HttpError& error, ErrorStyle style);
// The same body as one SSE event ("event: error\ndata: {...}\n\n"; OpenAI style has no event line,
// matching how OpenAI-compatible servers report mid-stream errors).
std::string sse_error_event(const HttpError& error, ErrorStyle style);

// The style for a path no route matched: Anthropic paths (/v1/messages..., /anthropic/...) get theirs.
ErrorStyle error_style_for_path(std::string_view path);

}  // namespace ds::server
