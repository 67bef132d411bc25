#include "http/http_error.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/field_path.h"

namespace ds::server {
namespace {

// Type names per HTTP status. OpenAI's own API uses invalid_request_error for most 4xx (the code says
// which); Anthropic has one type per status (docs "errors": invalid_request_error, authentication_error,
// not_found_error, request_too_large, rate_limit_error, api_error, overloaded_error, timeout_error).
std::string type_for(int http_status, ErrorStyle style) {
  if (style == ErrorStyle::openai) {
    switch (http_status) {
      case 401:
        return "authentication_error";
      case 403:
        return "permission_error";
      case 429:
        return "rate_limit_error";
      case 503:
        return "service_unavailable_error";
      case 504:
        return "timeout_error";
      default:
        return http_status >= 500 ? "server_error" : "invalid_request_error";
    }
  }
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return http_status >= 500 ? "api_error" : "invalid_request_error";
  }
}

HttpError make(int http_status, ErrorStyle style, std::string message, std::string code) {
  HttpError e;
  e.http_status = http_status;
  e.type = type_for(http_status, style);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

nlohmann::json null_if_empty(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

}  // namespace

HttpError http_error_from_status(const Status& status, ErrorStyle style, int retry_after_s) {
  const ErrorCode code = status.code();
  HttpError e;
  switch (code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::engine_bad_request:
    case ErrorCode::recipe_bad_request:
    case ErrorCode::recipe_unsupported:
    case ErrorCode::model_bad_input:
    case ErrorCode::model_unsupported:
    case ErrorCode::tokenizer_bad_input:
    case ErrorCode::tokenizer_unknown_id:
    case ErrorCode::grammar_bad_input:
    case ErrorCode::grammar_unsupported:
    case ErrorCode::grammar_too_large:
    case ErrorCode::grammar_empty:
      e = make(400, style, status.message(), error_code_name(code));
      e.param = status_field_path(status);
      return e;
    case ErrorCode::server_unauthorized:
      e = make(401, style, status.message(), "invalid_api_key");
      return e;
    case ErrorCode::not_found:
    case ErrorCode::server_not_found:
      return make(404, style, status.message(), "not_found");
    case ErrorCode::server_payload_too_large:
      return make(413, style, status.message(), "payload_too_large");
    case ErrorCode::engine_overloaded:
      e = make(429, style, status.message(), error_code_name(code));
      // A full admission queue is the server's load, not the client's rate: Anthropic calls that
      // overloaded_error (its rate_limit_error is per account). 429 either way, so clients that
      // back off on 429 (both SDKs do, honouring Retry-After) behave the same on both APIs.
      if (style == ErrorStyle::anthropic) e.type = "overloaded_error";
      e.retry_after_s = retry_after_s;
      return e;
    case ErrorCode::engine_shutting_down:
    case ErrorCode::kvcache_out_of_blocks:
    case ErrorCode::kvcache_tier_unavailable:  // DELETE /v1/cache with Redis unreachable
      e = make(503, style, status.message(), error_code_name(code));
      e.retry_after_s = retry_after_s;
      return e;
    case ErrorCode::engine_deadline_exceeded:
      return make(504, style, status.message(), error_code_name(code));
    case ErrorCode::engine_cancelled:
      // Nobody is usually left to read this; 499 is the de-facto "client closed request" status.
      return make(499, style, status.message(), error_code_name(code));
    default:
      // io, weights, internal, ...: a server-side fault. The message may hold paths or internals.
      return internal_error(style);
  }
}

HttpError not_found_error(ErrorStyle style, std::string_view method, std::string_view path) {
  return make(404, style, fmt::format("no route for {} {}", method, path), "not_found");
}

HttpError method_not_allowed_error(ErrorStyle style, std::string_view method, std::string_view path) {
  return make(405, style, fmt::format("method {} not allowed on {}", method, path), "method_not_allowed");
}

HttpError unauthorized_error(ErrorStyle style) {
  return make(401, style,
              "missing or invalid API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
              "invalid_api_key");
}

HttpError forbidden_error(ErrorStyle style) {
  return make(403, style, "this API key may not use admin routes (they need an admin key)",
              "admin_key_required");
}

HttpError payload_too_large_error(ErrorStyle style, size_t limit_bytes) {
  return make(413, style, fmt::format("request body exceeds the limit of {} bytes", limit_bytes),
              "payload_too_large");
}

HttpError bad_http_error(ErrorStyle style, std::string_view why) {
  return make(400, style, fmt::format("malformed HTTP request: {}", why), "bad_http_request");
}

HttpError headers_too_large_error(ErrorStyle style) {
  return make(431, style, "request header fields too large or too many", "headers_too_large");
}

HttpError internal_error(ErrorStyle style) {
  return make(500, style, "internal server error", "internal_error");
}

HttpError shutting_down_error(ErrorStyle style, int retry_after_s) {
  HttpError e = make(503, style, "the server is shutting down", "engine_shutting_down");
  e.retry_after_s = retry_after_s;
  return e;
}

std::string error_body(const HttpError& error, ErrorStyle style) {
  nlohmann::json body;
  if (style == ErrorStyle::openai) {
    body["error"] = {{"message", error.message},
                     {"type", error.type},
                     {"param", null_if_empty(error.param)},
                     {"code", null_if_empty(error.code)}};
  } else {
    body["type"] = "error";
    body["error"] = {{"type", error.type}, {"message", error.message}};
  }
  // replace: a message echoing invalid UTF-8 from the client must not make dump() throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_error_event(const HttpError& error, ErrorStyle style) {
  if (style == ErrorStyle::anthropic)
    return fmt::format("event: error\ndata: {}\n\n", error_body(error, style));
  return fmt::format("data: {}\n\n", error_body(error, style));
}

ErrorStyle error_style_for_path(std::string_view path) {
  if (path.starts_with("/v1/messages") || path.starts_with("/anthropic/")) return ErrorStyle::anthropic;
  return ErrorStyle::openai;
}

}  // namespace ds::server
