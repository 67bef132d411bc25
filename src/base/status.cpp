#include "base/status.h"

namespace ds {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok:
      return "ok";
    case ErrorCode::io_error:
      return "io_error";
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::not_found:
      return "not_found";
    case ErrorCode::internal:
      return "internal";
    case ErrorCode::weights_bad_header:
      return "weights_bad_header";
    case ErrorCode::weights_bad_tensor:
      return "weights_bad_tensor";
    case ErrorCode::weights_missing_tensor:
      return "weights_missing_tensor";
    case ErrorCode::weights_bad_config:
      return "weights_bad_config";
    case ErrorCode::weights_shape_mismatch:
      return "weights_shape_mismatch";
    case ErrorCode::kvcache_out_of_blocks:
      return "kvcache_out_of_blocks";
    case ErrorCode::kvcache_tier_miss:
      return "kvcache_tier_miss";
    case ErrorCode::kvcache_tier_corrupt:
      return "kvcache_tier_corrupt";
    case ErrorCode::kvcache_tier_unavailable:
      return "kvcache_tier_unavailable";
    case ErrorCode::tokenizer_bad_file:
      return "tokenizer_bad_file";
    case ErrorCode::tokenizer_bad_input:
      return "tokenizer_bad_input";
    case ErrorCode::tokenizer_unknown_id:
      return "tokenizer_unknown_id";
    case ErrorCode::model_bad_input:
      return "model_bad_input";
    case ErrorCode::model_unsupported:
      return "model_unsupported";
    case ErrorCode::engine_overloaded:
      return "engine_overloaded";
    case ErrorCode::engine_bad_request:
      return "engine_bad_request";
    case ErrorCode::engine_deadline_exceeded:
      return "engine_deadline_exceeded";
    case ErrorCode::engine_cancelled:
      return "engine_cancelled";
    case ErrorCode::engine_shutting_down:
      return "engine_shutting_down";
    case ErrorCode::recipe_bad_request:
      return "recipe_bad_request";
    case ErrorCode::recipe_unsupported:
      return "recipe_unsupported";
    case ErrorCode::server_unauthorized:
      return "server_unauthorized";
    case ErrorCode::server_not_found:
      return "server_not_found";
    case ErrorCode::server_payload_too_large:
      return "server_payload_too_large";
    case ErrorCode::grammar_bad_input:
      return "grammar_bad_input";
    case ErrorCode::grammar_unsupported:
      return "grammar_unsupported";
    case ErrorCode::grammar_too_large:
      return "grammar_too_large";
    case ErrorCode::grammar_empty:
      return "grammar_empty";
    case ErrorCode::transport_io:
      return "transport_io";
    case ErrorCode::transport_bad_message:
      return "transport_bad_message";
    case ErrorCode::transport_auth_failed:
      return "transport_auth_failed";
    case ErrorCode::transport_peer_mismatch:
      return "transport_peer_mismatch";
    case ErrorCode::transport_timeout:
      return "transport_timeout";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace ds
