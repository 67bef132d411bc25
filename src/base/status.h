// Status and Result<T>: errors as values inside the engine (STYLE habit 3/4).
// Error codes are numbered by subsystem; each code carries a kind (user input, retryable, bug)
// so boundaries (CLI, HTTP) can map them without string matching.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace ds {

enum class ErrorKind { user, retryable, bug };

// Subsystem ranges: 1xxx base/io, 2xxx weights, 3xxx kvcache, 4xxx tokenizer, 5xxx model,
// 6xxx engine, 7xxx recipe/server, 8xxx kernels, 9xxx grammar, 10xxx transport.
enum class ErrorCode : int {
  ok = 0,
  io_error = 1001,          // open/read/mmap failed
  invalid_argument = 1002,  // caller passed something out of range
  not_found = 1003,
  internal = 1999,            // a bug: an invariant did not hold
  weights_bad_header = 2001,  // safetensors header malformed
  weights_bad_tensor = 2002,  // tensor entry inconsistent (dtype, shape, offsets)
  weights_missing_tensor = 2003,
  weights_bad_config = 2004,      // config.json missing/invalid key
  weights_shape_mismatch = 2005,  // tensor present but wrong shape/dtype for the model
  kvcache_out_of_blocks = 3001,
  kvcache_tier_miss = 3002,         // a KV tier does not hold the entry (or it expired)
  kvcache_tier_corrupt = 3003,      // a KV tier entry failed its checksum or header checks
  kvcache_tier_unavailable = 3004,  // a KV tier cannot be reached now (Redis down): skipped, retried later
  tokenizer_bad_file = 4001,
  tokenizer_bad_input = 4002,  // e.g. invalid UTF-8 text
  tokenizer_unknown_id = 4003,
  model_bad_input = 5001,  // token id out of range, sequence too long
  model_unsupported = 5002,
  engine_overloaded = 6001,         // admission queue full: retry later (HTTP 429/503 + Retry-After)
  engine_bad_request = 6002,        // request invalid for this engine (prompt too long, bad sampling params)
  engine_deadline_exceeded = 6003,  // the request's deadline passed before it finished
  engine_cancelled = 6004,          // cancelled by the caller (client disconnected)
  engine_shutting_down = 6005,      // the engine is stopping; no new work
  recipe_bad_request = 7001,        // API request invalid (message names the field)
  recipe_unsupported = 7002,        // valid API feature this model/encoding does not support
  server_unauthorized = 7101,
  server_not_found = 7102,
  server_payload_too_large = 7103,
  grammar_bad_input = 9001,         // invalid regex, JSON Schema or grammar text (message has position/path)
  grammar_unsupported = 9002,       // a valid keyword/construct the compilers do not enforce (named)
  grammar_too_large = 9003,         // over a configured size or compile-time limit
  grammar_empty = 9004,             // the language is empty or can never terminate
  transport_io = 10001,             // a UCX/socket operation failed or the peer is gone
  transport_bad_message = 10002,    // a peer's control message is malformed
  transport_auth_failed = 10003,    // HMAC did not verify (another shared secret) or no secret set
  transport_peer_mismatch = 10004,  // peer speaks another protocol version, model or KV layout
  transport_timeout = 10005,        // a bounded wait ran out
};

constexpr ErrorKind error_kind(ErrorCode code) {
  switch (code) {
    case ErrorCode::kvcache_out_of_blocks:
    case ErrorCode::kvcache_tier_unavailable:
    case ErrorCode::engine_overloaded:
    case ErrorCode::engine_shutting_down:
    case ErrorCode::engine_deadline_exceeded:
    case ErrorCode::transport_io:
    case ErrorCode::transport_timeout:
      return ErrorKind::retryable;
    case ErrorCode::internal:
      return ErrorKind::bug;
    default:
      return ErrorKind::user;
  }
}

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }

  bool ok() const { return code_ == ErrorCode::ok; }
  ErrorCode code() const { return code_; }
  ErrorKind kind() const { return error_kind(code_); }
  const std::string& message() const { return message_; }
  // "weights_bad_header: model.safetensors: header length 99 exceeds file size 12"
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

inline Status ok_status() { return {}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ds

#define DS_CONCAT_INNER(a, b) a##b
#define DS_CONCAT(a, b) DS_CONCAT_INNER(a, b)

// Return the Status from the enclosing function if `expr` (a Status) is not ok.
#define DS_TRY(expr)                                 \
  do {                                               \
    ::ds::Status ds_try_status_ = (expr);            \
    if (!ds_try_status_.ok()) return ds_try_status_; \
  } while (0)

// `DS_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its error.
#define DS_ASSIGN_OR_RETURN(lhs, expr) DS_ASSIGN_OR_RETURN_IMPL(DS_CONCAT(ds_result_, __LINE__), lhs, expr)
#define DS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
