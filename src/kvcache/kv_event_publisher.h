// KvEventPublisher: the engine's KV events on a ZeroMQ PUB socket, as vLLM publishes them
// (`--kv-events-endpoint tcp://127.0.0.1:PORT`; docs/kvcache.md, KV events). Each batch is one
// three-part message: topic, an 8-byte big-endian sequence number (0, 1, 2, ... per publisher: a
// subscriber sees a gap when it missed batches) and the msgpack payload (kv_event_encoding.h).
//
// publish() never blocks the engine thread: batches go to a bounded queue that a sender thread
// drains; past the bound a batch is dropped and counted (its sequence number is skipped, so
// subscribers notice). A PUB socket itself drops for slow subscribers (ZeroMQ's high-water mark).
//
// Replay (`--kv-events-replay-endpoint`, vLLM's `replay_endpoint`): the sender keeps the last
// `replay_buffer_batches` sent batches and answers on a ZeroMQ ROUTER socket, in vLLM's protocol:
// a request [identity, "", start_seq (8 bytes, big-endian)] (a DEALER without the empty delimiter
// works too) gets [identity, "", seq, payload] for every kept batch with seq >= start_seq, in
// order, then the end marker [identity, "", 0xFF x 8, ""]. A subscriber that saw a gap fetches
// what it missed this way; what is no longer kept (or was dropped from the full queue) is absent
// from the reply, so the subscriber can tell.
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
  std::string replay_endpoint;           // ROUTER socket for missed batches ("" = none; port 0 = free)
  size_t replay_buffer_batches = 10000;  // batches kept for replay (vLLM's buffer_steps)
};

struct KvEventPublisherStats {
  int64_t batches_published = 0;
  int64_t events_published = 0;
  int64_t batches_dropped = 0;   // the queue was full
  int64_t replay_requests = 0;   // well-formed replay requests answered
  int64_t batches_replayed = 0;  // batches sent in those answers
  int64_t replay_bad_requests = 0;
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
  const std::string& endpoint() const { return endpoint_; }                // as bound (the real port)
  const std::string& replay_endpoint() const { return replay_endpoint_; }  // as bound; "" = none
  KvEventPublisherStats stats() const;

 private:
  struct Impl;
  KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Impl> impl, std::string endpoint,
                   std::string replay_endpoint);
  void run();
  void send_batch(uint64_t seq, const std::vector<KvCacheEvent>& events);
  void serve_replay_requests();

  KvEventPublisherConfig config_;
  std::unique_ptr<Impl> impl_;  // the ZeroMQ context and socket (sender thread only after start)
  std::string endpoint_;
  std::string replay_endpoint_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<KvCacheEvent>> queue_;  // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  KvEventPublisherStats stats_;                  // guarded by mu_
  uint64_t next_seq_ = 0;                        // guarded by mu_: dropped batches use theirs up
  std::thread thread_;
};

}  // namespace ds
