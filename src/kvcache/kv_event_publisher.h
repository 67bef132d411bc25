// KvEventPublisher: the engine's KV events on a ZeroMQ PUB socket, as vLLM publishes them
// (`--kv-events-endpoint tcp://127.0.0.1:PORT`; docs/kvcache.md, KV events). Each batch is one
// three-part message: topic, an 8-byte big-endian sequence number (0, 1, 2, ... per publisher: a
// subscriber sees a gap when it missed batches) and the msgpack payload (kv_event_encoding.h).
//
// publish() never blocks the engine thread: batches go to a bounded queue that a sender thread
// drains; past the bound a batch is dropped and counted (its sequence number is skipped, so
// subscribers notice). A PUB socket itself drops for slow subscribers (ZeroMQ's high-water mark).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/kv_event_encoding.h"

namespace ds {

struct KvEventPublisherConfig {
  std::string endpoint;  // bound, e.g. tcp://127.0.0.1:5557 (port 0 or * = a free one: endpoint())
  std::string topic;     // first frame of every message ("" as vLLM's default)
  KvEventBatchFormat format;
  size_t max_queued_batches = 4096;
};

struct KvEventPublisherStats {
  int64_t batches_published = 0;
  int64_t events_published = 0;
  int64_t batches_dropped = 0;  // the queue was full
};

class KvEventPublisher {
 public:
  // Binds the socket and starts the sender. invalid_argument naming the endpoint when ZeroMQ refuses it.
  static Result<std::unique_ptr<KvEventPublisher>> start(const KvEventPublisherConfig& config);
  ~KvEventPublisher();  // sends what is queued, then closes
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Any thread, never blocks (beyond a short lock).
  void publish(std::vector<KvCacheEvent> events);
  const std::string& endpoint() const { return endpoint_; }  // as bound (the real port)
  KvEventPublisherStats stats() const;

 private:
  struct Impl;
  KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Impl> impl, std::string endpoint);
  void run();

  KvEventPublisherConfig config_;
  std::unique_ptr<Impl> impl_;  // the ZeroMQ context and socket (sender thread only after start)
  std::string endpoint_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<KvCacheEvent>> queue_;  // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  KvEventPublisherStats stats_;                  // guarded by mu_
  uint64_t next_seq_ = 0;                        // guarded by mu_: dropped batches use theirs up
  std::thread thread_;
};

}  // namespace ds
