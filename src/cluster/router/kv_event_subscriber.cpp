#include "cluster/router/kv_event_subscriber.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "cluster/router/kv_event_decoding.h"

namespace ds::cluster {
namespace {

struct Subscription {
  size_t worker = 0;
  std::string url;
  std::unique_ptr<zmq::socket_t> socket;
  std::optional<uint64_t> next_seq;  // unknown until the first batch
};

uint64_t big_endian_u64(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* b = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | b[i];
  return v;
}

}  // namespace

KvEventSubscriber::KvEventSubscriber(WorkerPool& pool, RequestRouter& router, RouterMetrics& metrics,
                                     std::chrono::milliseconds poll_interval)
    : pool_(pool), router_(router), metrics_(metrics), poll_interval_(poll_interval), thread_([this] {
        run();
      }) {}

KvEventSubscriber::~KvEventSubscriber() {
  stop_.store(true);
  thread_.join();
}

void KvEventSubscriber::run() {
  zmq::context_t context(1);
  std::vector<Subscription> subs;
  size_t n_seen_workers = 0;
  auto forget = [this](Subscription& s, const char* why) {
    router_.forget_worker(s.worker);
    metrics_.kv_event_resets.with({s.url, why}).inc();
  };
  // One batch: false when the socket has nothing more to read now.
  auto read_one = [&](Subscription& s) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    do {
      const bool first = frames.empty();
      if (!s.socket->recv(frame, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) return false;
      frames.push_back(std::move(frame));
    } while (frames.back().more());
    if (frames.size() != 3 || frames[1].size() != 8) {
      metrics_.kv_event_errors.with({s.url}).inc();
      return true;
    }
    const uint64_t seq = big_endian_u64(frames[1]);
    if (s.next_seq && seq != *s.next_seq) forget(s, seq < *s.next_seq ? "restart" : "gap");
    s.next_seq = seq + 1;
    Result<WorkerKvEventBatch> batch = decode_kv_event_batch(frames[2].to_string_view());
    if (!batch.ok()) {
      metrics_.kv_event_errors.with({s.url}).inc();
      std::fprintf(stderr, "deepinfer route: %s: %s\n", s.url.c_str(), batch.status().message().c_str());
      return true;
    }
    const KvEventApplyCounts c = router_.kv_events().apply(s.worker, *batch);
    metrics_.kv_event_batches.with({s.url}).inc();
    metrics_.kv_event_blocks.with({s.url, "stored"}).inc(static_cast<double>(c.blocks_stored));
    metrics_.kv_event_blocks.with({s.url, "removed"}).inc(static_cast<double>(c.blocks_removed));
    metrics_.kv_event_blocks.with({s.url, "dropped"}).inc(static_cast<double>(c.blocks_dropped));
    if (c.cleared > 0)
      metrics_.kv_event_resets.with({s.url, "all_cleared"}).inc(static_cast<double>(c.cleared));
    return true;
  };

  while (!stop_.load()) {
    // Workers added since the last turn (SIGHUP) get their socket; ids never change.
    const auto workers = pool_.all();
    for (; n_seen_workers < workers.size(); ++n_seen_workers) {
      const WorkerAddress& a = workers[n_seen_workers]->address;
      if (a.events_endpoint.empty()) continue;
      Subscription s{
          n_seen_workers, a.url, std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub), {}};
      s.socket->set(zmq::sockopt::linger, 0);
      s.socket->set(zmq::sockopt::subscribe, "");
      try {
        s.socket->connect(a.events_endpoint);  // asynchronous: ZeroMQ reconnects on its own
      } catch (const zmq::error_t& e) {
        std::fprintf(stderr, "deepinfer route: %s: cannot connect to %s: %s\n", a.url.c_str(),
                     a.events_endpoint.c_str(), e.what());
        continue;
      }
      subs.push_back(std::move(s));
    }
    if (subs.empty()) {
      std::this_thread::sleep_for(poll_interval_);
      continue;
    }
    std::vector<zmq::pollitem_t> items;
    for (Subscription& s : subs) items.push_back({s.socket->handle(), 0, ZMQ_POLLIN, 0});
    zmq::poll(items, poll_interval_);
    for (size_t i = 0; i < subs.size(); ++i) {
      if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
      for (int n = 0; n < 256 && read_one(subs[i]); ++n) {
      }
    }
  }
}

}  // namespace ds::cluster
