// HttpServer: an HTTP/1.1 server on Boost.Beast/Asio for the OpenAI/Anthropic-compatible API.
//
// - A fixed set of io threads (ServerConfig::n_io_threads) runs every connection as a state machine:
//   thousands of idle keep-alive connections cost memory, never a thread each.
// - Routes come from a RouteTable built by the app; handlers answer through a ResponseChannel (whole body
//   or SSE stream) and learn when the client went away.
// - Limits: body size (413), header bytes and count (431), idle/read/write timeouts, connection cap.
// - API keys (constant-time), request ids, Prometheus HTTP metrics.
//
// Lifetime (RAII): start() binds and starts the threads; the destructor (or shutdown()) stops accepting,
// closes idle connections, lets in-flight responses finish for drain_timeout, then cuts the rest off
// (their handlers see on_close) and joins the threads.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "http/route_table.h"
#include "http/server_config.h"
#include "http/serving_metrics.h"

namespace ds::server {

struct ServerCore;

class HttpServer {
 public:
  // io_error when the address cannot be bound (in use, not local); invalid_argument for a bad config.
  // `metrics` may be null; else it must outlive the server.
  static Result<std::unique_ptr<HttpServer>> start(ServerConfig config, RouteTable router, Logger log,
                                                   ServingMetrics* metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  size_t n_open_connections() const;
  int n_io_threads() const { return static_cast<int>(threads_.size()); }
  // Idempotent; see the header comment. Call from a thread that is not an io thread.
  void shutdown();

 private:
  HttpServer(std::unique_ptr<ServerCore> core, uint16_t port);
  void run_threads(int n);

  std::unique_ptr<ServerCore> core_;
  uint16_t port_ = 0;
  struct Acceptor;
  std::shared_ptr<Acceptor> acceptor_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace ds::server
