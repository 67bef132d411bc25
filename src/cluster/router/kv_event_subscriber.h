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
                    std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));
  ~KvEventSubscriber();  // stops and joins (within poll_interval)
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

 private:
  void run();

  WorkerPool& pool_;
  RequestRouter& router_;
  RouterMetrics& metrics_;
  const std::chrono::milliseconds poll_interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ds::cluster
