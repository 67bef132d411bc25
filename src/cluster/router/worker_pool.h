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
  // the last poll, and the prompt tokens this router sent it since (reset by each fresh report).
  std::atomic<int64_t> reported_prefill_tokens{0};
  std::atomic<int64_t> routed_prefill_tokens{0};

  // What the policies balance: the router's own count, or what the worker reports when other clients
  // load it too.
  int64_t load() const {
    const int64_t reported =
        reported_running.load(std::memory_order_relaxed) + reported_waiting.load(std::memory_order_relaxed);
    const int64_t own = in_flight.load(std::memory_order_relaxed);
    return own > reported ? own : reported;
  }
  bool usable() const { return configured.load() && healthy.load(); }
  // A prefill server's queue in prompt tokens as this router can tell between two polls.
  int64_t prefill_queue_tokens() const {
    return reported_prefill_tokens.load(std::memory_order_relaxed) +
           routed_prefill_tokens.load(std::memory_order_relaxed);
  }
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
