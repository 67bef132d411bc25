// WorkerPool: the configured workers and what the router knows about each: health, its own
// in-flight count, the load the worker reports (/metrics), errors. Ids are positions that never
// change: a worker removed from the configuration (SIGHUP) stays as a drained slot, one added later
// gets a new id, so counters and the prefix index never mix two workers up.
//
// Thread-safe: membership under a mutex, counters atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/router/worker_address.h"

namespace ds::cluster {

struct WorkerState {
  explicit WorkerState(WorkerAddress a) : address(std::move(a)) {}
  const WorkerAddress address;
  std::atomic<bool> configured{true};  // false once removed from the configuration
  std::atomic<bool> healthy{false};    // set by the health poller (and cleared on connect errors)
  std::atomic<bool> lost_cache{true};  // down since last seen (or never seen): its prefix index is stale
  std::atomic<int64_t> in_flight{0};   // requests this router has open on it
  std::atomic<int64_t> reported_running{0};
  std::atomic<int64_t> reported_waiting{0};
  std::atomic<double> reported_kv_usage{0.0};
  // Prefill servers (P/D): the prompt tokens the server reported pending (queued and in progress) at
  // the last poll.
  std::atomic<int64_t> reported_prefill_tokens{0};

  // What the policies balance: the router's own count, or what the worker reports when other clients
  // load it too.
  int64_t load() const {
    const int64_t reported =
        reported_running.load(std::memory_order_relaxed) + reported_waiting.load(std::memory_order_relaxed);
    const int64_t own = in_flight.load(std::memory_order_relaxed);
    return own > reported ? own : reported;
  }
  bool usable() const { return configured.load() && healthy.load(); }
  // A prefill server's queue in prompt tokens as this router can tell between two polls: the last
  // report plus what was sent since and is still open.
  int64_t prefill_queue_tokens() const {
    return reported_prefill_tokens.load(std::memory_order_relaxed) + routed_prefill_tokens();
  }
  // Prompt tokens sent to this prefill server since its last report. `route_prefill` counts a request
  // and returns the report epoch it was counted in; `end_prefill` takes it back when the request ends
  // (its prefill is over by then) unless a report since has already replaced the count — so the count
  // does not keep finished requests until the next poll.
  int64_t routed_prefill_tokens() const;
  uint64_t route_prefill(int64_t tokens);
  void end_prefill(int64_t tokens, uint64_t epoch);
  // A fresh report: the routed count starts again from 0.
  void report_prefill_tokens(int64_t pending);

 private:
  mutable std::mutex prefill_mu_;
  int64_t routed_prefill_ = 0;
  uint64_t prefill_epoch_ = 0;
};

class WorkerPool {
 public:
  // Adds the new addresses (unhealthy until polled), un-drains re-added ones, drains the missing.
  // Returns the ids that were added.
  std::vector<size_t> set_workers(const std::vector<WorkerAddress>& addresses);

  size_t size() const;
  std::shared_ptr<WorkerState> at(size_t id) const;
  std::vector<std::shared_ptr<WorkerState>> all() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<WorkerState>> workers_;
};

}  // namespace ds::cluster
