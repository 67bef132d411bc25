// The routes that do not generate: health, readiness, metrics, the model list, tokenize and detokenize.
// The generation routes (chat, completions, responses, messages) live in their own routes_* files.
//
//   GET  /health      200 {"status":"ok"} while the process serves (liveness; 503 once stopping)
//   GET  /ready       200 when `ready()` says so, else 503 + Retry-After (model loading, shutting down)
//   GET  /metrics     Prometheus text from the registry
//   GET  /v1/models   {"object":"list","data":[{"id","object":"model","created","owned_by","max_model_len"}]}
//   POST /tokenize    {"prompt": str, "add_special_tokens": bool = true}
//                     or {"messages": [...], "add_generation_prompt": true, ...Chat Completions fields}
//                     -> {"tokens","count","max_model_len"}
//   POST /detokenize  {"tokens": [int]} -> {"prompt": str}
// (vLLM's shapes, so its clients and benchmark tools work unchanged.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "http/metrics_registry.h"
#include "http/route_table.h"
#include "recipe/conversion_options.h"
#include "recipe/encoding.h"
#include "tokenizer/tokenizer.h"

namespace ds::server {

struct OperationalRoutesConfig {
  std::string model_id;                  // the id /v1/models lists (the served model name)
  int64_t max_model_len = 0;             // context length reported by /v1/models and /tokenize
  int64_t created_unix_s = 0;            // "created" of the model entry (server start time)
  const Tokenizer* tokenizer = nullptr;  // required for /tokenize and /detokenize; must outlive the server
  const MetricsRegistry* metrics = nullptr;  // null: no /metrics route; must outlive the server
  std::function<bool()> healthy;             // null: always healthy
  std::function<bool()> ready;               // null: always ready
  int retry_after_s = 1;
  // /tokenize with "messages": the body is read as a Chat Completions request and rendered with
  // this encoding and these options, exactly as the chat route does, so "count" equals that
  // request's usage.prompt_tokens. nullopt: "messages" is refused (400).
  std::optional<recipe::PromptEncodingKind> chat_encoding;
  recipe::ConversionOptions conversion;
};

// Registers the routes; invalid_argument if one is already registered.
Status add_operational_routes(RouteTable& router, const OperationalRoutesConfig& config);

}  // namespace ds::server
