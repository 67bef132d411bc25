// Knobs of the HTTP server. Limits and timeouts default to values that suit an LLM API (large JSON
// bodies, long generations) while bounding what one client can hold (serving-anchors §5).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "http/api_keys.h"

namespace ds::server {

struct ServerConfig {
  // Must be set explicitly: there is no "all interfaces" default (the CLI defaults to 127.0.0.1).
  std::string host;
  uint16_t port = 0;     // 0: an ephemeral port (tests); HttpServer::port() says which
  int n_io_threads = 1;  // connections are state machines on these threads, never a thread each
  int listen_backlog = 1024;
  size_t max_connections = 10000;  // beyond it new connections get 503 and are closed

  size_t max_body_bytes = 32u << 20;    // 413 beyond it (a 128k-token prompt as JSON is ~1 MB)
  size_t max_header_bytes = 16u << 10;  // request line + all header fields; 431 beyond it
  size_t max_header_count = 100;        // 431 beyond it
  // Keep-alive: how long a connection may sit idle waiting for the first byte of its next request.
  std::chrono::milliseconds idle_timeout{60'000};
  // From a request's first byte to its last (slowloris: trickling bytes does not reset it).
  std::chrono::milliseconds request_read_timeout{30'000};
  // One write's completion: a client that stops reading is dropped (and its request cancelled).
  std::chrono::milliseconds write_timeout{60'000};
  // Shutdown: how long in-flight responses may still finish before their clients are cut off.
  std::chrono::milliseconds drain_timeout{5'000};
  // Stream data queued for a slow reader beyond which the client counts as gone.
  size_t max_unsent_bytes = 8u << 20;
  int retry_after_s = 1;  // Retry-After on 429/503

  ApiKeySet api_keys;                        // empty: no authentication
  bool operational_routes_need_key = false;  // health/ready/metrics open by default
  bool enable_admin_routes = false;
  // Keys of admin routes, apart from the client keys. Non-empty: an admin route needs one of these
  // (no key or an unknown one: 401; a client key: 403). Empty: admin routes take the client keys.
  ApiKeySet admin_api_keys;
};

// invalid_argument naming the bad field.
Status validate_server_config(const ServerConfig& config);

}  // namespace ds::server
