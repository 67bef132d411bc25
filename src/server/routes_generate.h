// The generation routes (api_routes.h: /v1/chat/completions, /v1/completions, /v1/responses,
// /v1/messages and its /anthropic aliases), stream and non-stream, wired to the engine and the
// recipe. Per request: parse + validate (recipe, 400 with the field path), render the prompt with
// the model's encoding (Completions: the raw prompt), tokenize, submit to the engine; the engine's
// token events feed the recipe's OutputParser and the API's response builder (recipe/api_responder.h),
// answered through the ResponseChannel.
//
// Chat stop strings go to the OutputParser (they apply to content only), not to the engine; when
// the parser matches one, the engine request is cancelled. A client that goes away cancels the
// engine request (ResponseChannel::on_close), so its KV blocks are freed in the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/log.h"
#include "base/status.h"
#include "engine/engine.h"
#include "http/route_table.h"
#include "http/serving_metrics.h"
#include "recipe/conversion_options.h"
#include "recipe/encoding.h"
#include "tokenizer/tokenizer.h"

namespace ds::server {

struct GenerateRoutesConfig {
  Engine* engine = nullptr;              // required; must outlive the server
  const Tokenizer* tokenizer = nullptr;  // required; must outlive the server
  recipe::PromptEncodingKind encoding = recipe::PromptEncodingKind::deepseek_v3;
  recipe::ConversionOptions conversion;  // V3: default_thinking = false (no thinking mode)
  std::string model_id;                  // "model" of every response
  int64_t default_max_tokens = 4096;     // when the request sets none
  ServingMetrics* metrics = nullptr;     // null: no per-request metrics; must outlive the server
  const Logger* log = nullptr;           // null: no logging; must outlive the server
  // P/D decode role (docs/pd.md): a request that carries kPrefillPeerHeader is handed here instead of
  // being submitted; the hook calls `resume` once (any thread) with the request to submit and a
  // lease the engine request holds until it ends. Empty: the header is ignored.
  std::function<void(std::string prefill_peer, Request request, std::function<bool()> client_gone,
                     std::function<void(Request, std::shared_ptr<void>)> resume)>
      kv_import;
};

// The header the router sets on a request it disaggregates: the prefill server's URL.
inline constexpr std::string_view kPrefillPeerHeader = "X-DeepInfer-Prefill-Peer";

// Registers the generation routes the engine serves; invalid_argument for a missing engine or
// tokenizer or a route already registered.
Status add_generate_routes(RouteTable& router, const GenerateRoutesConfig& config);

}  // namespace ds::server
