// HealthPoller: a thread that polls every configured worker's GET /health and GET /metrics
// (num_requests_running, num_requests_waiting, kv_cache_usage_perc) on a fixed period, with short
// timeouts, so an unhealthy worker leaves the rotation (drained: its open requests finish, no new
// ones) and rejoins once it answers again. A worker that was down has lost its KV cache: its prefix
// index is cleared when it comes back. Without a router (the P/D prefill servers: nothing is indexed
// for them) it keeps only their health and reported load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/router/request_router.h"
#include "cluster/router/worker_pool.h"

namespace ds::cluster {

struct HealthPollConfig {
  std::chrono::milliseconds period{500};
  std::chrono::milliseconds timeout{1'000};
  std::string worker_api_key;  // for /metrics when the worker keys operational routes
};

class HealthPoller {
 public:
  // router: whose prefix index forgets a worker that was down (may be null).
  HealthPoller(WorkerPool& pool, RequestRouter* router, HealthPollConfig config);
  ~HealthPoller();  // stops and joins
  HealthPoller(const HealthPoller&) = delete;
  HealthPoller& operator=(const HealthPoller&) = delete;

  // One round now, on the caller's thread (startup: route only once workers are known healthy).
  void poll_once();

 private:
  void run();

  WorkerPool& pool_;
  RequestRouter* router_;
  const HealthPollConfig config_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ds::cluster
