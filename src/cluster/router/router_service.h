// RouterService: what `deepinfer route` runs behind its HTTP server. The public API of `serve`
// (the generation routes of http/api_routes.h, /v1/models) relayed to the workers, plus the
// router's own /health (the process is up), /ready (some worker is usable) and /metrics.
//
// Per generation request, on the HTTP io thread: render + tokenize the prompt as the worker will
// (request_prompt.h), hash its blocks, then hand a Relay to the router's own io threads, which pick
// the worker and pass the bytes through. Over max_open_requests the router answers 429 +
// Retry-After itself, as serve does when its queue is full.
//
// Lifetime: the HttpServer using these routes must be shut down (drained) before this is destroyed.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "cluster/router/health_poller.h"
#include "cluster/router/kv_event_subscriber.h"
#include "cluster/router/relay.h"
#include "cluster/router/request_prompt.h"
#include "cluster/router/request_router.h"
#include "cluster/router/router_metrics.h"
#include "cluster/router/worker_pool.h"
#include "http/metrics_registry.h"
#include "http/route_table.h"

namespace ds::cluster {

struct RouterServiceConfig {
  std::vector<WorkerAddress> workers;  // at least one
  RoutingConfig routing;
  RelayConfig relay;
  ConnectionPoolConfig connections;
  HealthPollConfig health;
  PromptRendering rendering;  // its tokenizer (may be null) must outlive the service
  int n_relay_threads = 1;
  int64_t max_open_requests = 4096;
  // P/D (docs/pd.md): prefill servers (--prefill). A generation request whose prompt has at least
  // pd_min_prompt_tokens tokens goes to its worker (a decode server) with the header
  // X-DeepInfer-Prefill-Peer listing them, the least loaded first (the router's open P/D requests
  // per prefill server, then its queue in prompt tokens: the last reported
  // deepinfer:num_prefill_tokens_pending plus the prompts this router sent it since; ties: the one
  // the prompt's first block hashes to when the router tokenizes, else round robin; one that fails
  // the health poll goes last), so the decode server tries the next one when one fails;
  // shorter prompts prefill on the worker.
  std::vector<std::string> prefill_urls;
  int64_t pd_min_prompt_tokens = 0;
  // Conditional disaggregation on a busy prefill pool: while the least loaded healthy prefill server
  // has this many open P/D requests, a request goes without the header (the decode server prefills
  // it). 0 = no limit.
  int64_t pd_max_prefill_open = 0;
  // The same by queued work: while the picked prefill server's queue (above) holds this many prompt
  // tokens, a request prefills on the decode server. 0 = no limit.
  int64_t pd_max_prefill_queue_tokens = 0;
};

class RouterService {
 public:
  static Result<std::unique_ptr<RouterService>> start(RouterServiceConfig config);
  ~RouterService();
  RouterService(const RouterService&) = delete;
  RouterService& operator=(const RouterService&) = delete;

  // Registers the public routes; invalid_argument when one exists already.
  Status add_routes(server::RouteTable& routes);
  // A new worker list (SIGHUP): new workers join once healthy, missing ones are drained.
  void set_workers(const std::vector<WorkerAddress>& workers);
  size_t n_usable_workers() const;
  // Stops polling and marks the service stopping (/health answers 503).
  void begin_shutdown() { stopping_.store(true); }

 private:
  explicit RouterService(RouterServiceConfig config);
  void handle_generation(server::ApiKind kind, server::ServerRequest request,
                         std::shared_ptr<server::ResponseChannel> out);
  void relay_plain(server::ServerRequest request, std::shared_ptr<server::ResponseChannel> out);
  RelayRequest base_request(const server::ServerRequest& request) const;
  bool refuse_if_overloaded(server::ResponseChannel& out);
  RelayContext relay_context();

  const RouterServiceConfig config_;
  server::MetricsRegistry registry_;
  WorkerPool pool_;
  RouterMetrics metrics_;
  RequestRouter router_;
  std::atomic<int64_t> open_relays_{0};
  // The header's list: least loaded first, ties by prefix affinity; `hold` counts the pick.
  // nullopt when the pick is at pd_max_prefill_open or pd_max_prefill_queue_tokens (the decode server
  // prefills).
  std::optional<std::string> prefill_peers(const std::vector<uint64_t>& prompt_blocks, size_t n_prompt_tokens,
                                           std::shared_ptr<void>& hold);
  std::atomic<uint64_t> next_prefill_{0};                     // ties: round robin over config_.prefill_urls
  std::unique_ptr<std::atomic<int64_t>[]> prefill_open_;      // open P/D requests per prefill server
  WorkerPool prefill_pool_;                                   // the prefill servers' health (ids = positions)
  server::MetricFamily<server::Gauge>& prefill_healthy_;      // {prefill}
  server::MetricFamily<server::Gauge>& prefill_open_gauge_;   // {prefill}
  server::MetricFamily<server::Gauge>& prefill_queue_gauge_;  // {prefill}: prefill_queue_tokens()
  server::MetricFamily<server::Counter>& decode_prefills_;    // {reason}: P/D requests prefilled on D
  std::atomic<bool> stopping_{false};
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  ConnectionPool connections_;  // after ioc_: its sockets close before the io_context goes
  std::vector<std::thread> threads_;
  std::unique_ptr<HealthPoller> poller_;              // stops before the rest goes
  std::unique_ptr<HealthPoller> prefill_poller_;      // P/D only
  std::unique_ptr<KvEventSubscriber> kv_subscriber_;  // last: stops first
};

}  // namespace ds::cluster
