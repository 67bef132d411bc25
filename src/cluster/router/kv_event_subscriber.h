// KvEventSubscriber: a thread that holds one ZeroMQ SUB socket per worker with a configured events
// endpoint (WorkerAddress::events_endpoint; never from a request) and applies each batch to the
// router's prefix index through KvEventIndex.
//
// Messages are the publisher's three frames (kvcache/kv_event_publisher.h): topic (any: the router
// subscribes to all), an 8-byte big-endian sequence number, the msgpack batch. The numbers tell
// what the router cannot otherwise see:
//   - a gap (missed batches: ZeroMQ's high-water mark, the publisher's full queue): the worker's
//     blocks are forgotten, since a missed BlockRemoved would claim blocks it no longer holds and a
//     missed BlockStored leaves its children unplaceable;
//   - a number that goes back: the worker restarted (its publisher counts from 0 again) and its
//     cache is empty: forgotten as well.
// A worker with a replay endpoint (WorkerAddress::replay_endpoint, `serve
// --kv-events-replay-endpoint`) gets a gap filled instead: the missed batches are fetched from its
// replay socket (a DEALER, vLLM's protocol) and applied in order; only when the replay cannot
// cover the gap is the worker forgotten. A router that starts after the worker fetches the history
// it missed the same way on the first batch it sees.
// Workers added on SIGHUP get a socket on the next turn of the loop (within poll_interval).
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/router/request_router.h"
#include "cluster/router/router_metrics.h"
#include "cluster/router/worker_pool.h"

namespace ds::cluster {

class KvEventSubscriber {
 public:
  KvEventSubscriber(WorkerPool& pool, RequestRouter& router, RouterMetrics& metrics,
                    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100),
                    std::chrono::milliseconds replay_timeout = std::chrono::milliseconds(1000));
  ~KvEventSubscriber();  // stops and joins (within poll_interval)
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

 private:
  void run();

  WorkerPool& pool_;
  RequestRouter& router_;
  RouterMetrics& metrics_;
  const std::chrono::milliseconds poll_interval_;
  const std::chrono::milliseconds replay_timeout_;  // for one replay answer, end marker included
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ds::cluster
