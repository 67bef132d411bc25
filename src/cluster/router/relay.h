// Relay: one client request passed through to a worker and its answer passed back, bytes as they are.
// An async Beast client on the router's io_context: take a kept-alive connection to the chosen worker
// (connection_pool.h) or connect, send, read the head, then either the
// whole body (sent to the client in one piece) or an SSE stream (forwarded event by event as bytes
// arrive, never re-encoded: only cut at event boundaries so an error event can follow cleanly).
//
// Retries (serving-anchors §4): before the client got a byte, a failed attempt (connect error, a
// worker that died after taking the request, a 429/503 answer) is retried on another worker, at most
// max_attempts in all and within the request's deadline. A stream that has started is never retried:
// it ends with an error event in the API's shape. A client that goes away closes the worker
// connection, which cancels the worker's engine request.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/router/connection_pool.h"
#include "cluster/router/request_router.h"
#include "http/response_channel.h"

namespace ds::cluster {

struct RelayConfig {
  std::string worker_api_key;  // "" = none; sent as "Authorization: Bearer ..." (never the client's key)
  int max_attempts = 3;
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds request_timeout{600'000};  // the whole exchange, every attempt included
  int retry_after_s = 1;
};

struct RelayRequest {
  std::string method;
  std::string target;  // path + "?query"
  std::string body;
  std::string request_id;                                            // the router's; the worker logs it too
  std::vector<std::pair<std::string, std::string>> forward_headers;  // content-type, accept, anthropic-*
  // Routing: the prompt's block hashes (empty: load only) and the session key.
  std::vector<uint64_t> prompt_blocks;
  size_t n_prompt_tokens = 0;
  std::optional<std::string> session;
  bool count_decision = true;  // false for non-generation requests (/v1/models)
  double prepare_seconds = 0;  // rendering + tokenizing + hashing, added to the decision time
  std::shared_ptr<void> hold;  // lives as long as the relay (P/D: the chosen prefill server's open count)
};

struct RelayContext {
  boost::asio::io_context* ioc = nullptr;
  RequestRouter* router = nullptr;
  WorkerPool* pool = nullptr;
  RouterMetrics* metrics = nullptr;
  const RelayConfig* config = nullptr;
  std::atomic<int64_t>* open_relays = nullptr;  // +1 while a relay lives (the router's own load)
  ConnectionPool* connections = nullptr;        // keep-alive connections to the workers
};

// Starts the relay; it owns itself until the response is finished or the client is gone.
void start_relay(const RelayContext& context, RelayRequest request,
                 std::shared_ptr<server::ResponseChannel> out);

}  // namespace ds::cluster
