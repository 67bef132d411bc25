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
  std::optional<uint64_t> next_seq;       // unknown until the first batch
  std::string replay_endpoint;            // "" = none
  std::unique_ptr<zmq::socket_t> replay;  // DEALER to it, made on first use
};

uint64_t big_endian_u64(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* b = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | b[i];
  return v;
}

using ReplayedBatch = std::pair<uint64_t, std::string>;  // (seq, payload)

// Asks the worker's replay socket (kvcache/kv_event_publisher.h, vLLM's protocol) for the batches
// from `from` on and keeps those below `until` (later ones come through the SUB socket). nullopt:
// no end marker within `timeout` — the socket is then dropped, so a late answer to this request
// cannot be taken for the answer to the next one.
std::optional<std::vector<ReplayedBatch>> fetch_replay(zmq::context_t& context, Subscription& s,
                                                       uint64_t from, uint64_t until,
                                                       std::chrono::milliseconds timeout) {
  try {
    if (!s.replay) {
      s.replay = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
      s.replay->set(zmq::sockopt::linger, 0);
      s.replay->connect(s.replay_endpoint);
    }
    unsigned char be[8];
    for (int i = 0; i < 8; ++i) be[i] = static_cast<unsigned char>(from >> (56 - 8 * i));
    s.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
    s.replay->send(zmq::buffer(be, 8), zmq::send_flags::none);
    std::vector<ReplayedBatch> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      std::vector<zmq::pollitem_t> items{{s.replay->handle(), 0, ZMQ_POLLIN, 0}};
      if (left.count() <= 0 || zmq::poll(items, left) <= 0) break;
      std::vector<zmq::message_t> frames;
      zmq::message_t frame;
      do {
        (void)s.replay->recv(frame, zmq::recv_flags::none);
        frames.push_back(std::move(frame));
      } while (frames.back().more());
      if (frames.size() != 3 || frames[1].size() != 8) continue;  // not a reply we understand
      if (frames[2].size() == 0) return out;                      // the end marker
      const uint64_t seq = big_endian_u64(frames[1]);
      if (seq >= from && seq < until) out.emplace_back(seq, frames[2].to_string());
    }
  } catch (const zmq::error_t&) {
  }
  s.replay.reset();
  return std::nullopt;
}

}  // namespace

KvEventSubscriber::KvEventSubscriber(WorkerPool& pool, RequestRouter& router, RouterMetrics& metrics,
                                     std::chrono::milliseconds poll_interval,
                                     std::chrono::milliseconds replay_timeout)
    : pool_(pool),
      router_(router),
      metrics_(metrics),
      poll_interval_(poll_interval),
      replay_timeout_(replay_timeout),
      thread_([this] { run(); }) {}

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
  auto apply = [this](Subscription& s, std::string_view payload) {
    Result<WorkerKvEventBatch> batch = decode_kv_event_batch(payload);
    if (!batch.ok()) {
      metrics_.kv_event_errors.with({s.url}).inc();
      std::fprintf(stderr, "deepinfer route: %s: %s\n", s.url.c_str(), batch.status().message().c_str());
      return;
    }
    const KvEventApplyCounts c = router_.kv_events().apply(s.worker, *batch);
    metrics_.kv_event_batches.with({s.url}).inc();
    metrics_.kv_event_blocks.with({s.url, "stored"}).inc(static_cast<double>(c.blocks_stored));
    metrics_.kv_event_blocks.with({s.url, "removed"}).inc(static_cast<double>(c.blocks_removed));
    metrics_.kv_event_blocks.with({s.url, "dropped"}).inc(static_cast<double>(c.blocks_dropped));
    if (c.cleared > 0)
      metrics_.kv_event_resets.with({s.url, "all_cleared"}).inc(static_cast<double>(c.cleared));
  };
  // Batches [from, until) missed (a gap) or never seen (joining: the router started after the
  // worker), fetched from the worker's replay socket. When the replay holds every one of them they
  // are applied in order and nothing is forgotten; otherwise (the buffer moved on, a batch was
  // dropped before it was sent, no answer) a gap still forgets the worker, and the unbroken run of
  // batches that ends at until - 1 is applied on top — a suffix of the history only leaves out
  // blocks, so the estimate stays an under-estimate.
  auto catch_up = [&](Subscription& s, uint64_t from, uint64_t until, bool joining) {
    std::optional<std::vector<ReplayedBatch>> got = fetch_replay(context, s, from, until, replay_timeout_);
    if (!got) {
      metrics_.kv_event_replays.with({s.url, "failed"}).inc();
      if (!joining) forget(s, "gap");
      return;
    }
    size_t run_begin = 0;  // start of the unbroken run ending at the last batch
    for (size_t i = 1; i < got->size(); ++i)
      if ((*got)[i].first != (*got)[i - 1].first + 1) run_begin = i;
    const bool reaches_end = !got->empty() && got->back().first == until - 1;
    const bool whole = reaches_end && run_begin == 0 && got->front().first == from;
    metrics_.kv_event_replays.with({s.url, whole ? "filled" : "partial"}).inc();
    if (!whole && !joining) forget(s, "gap");
    if (!reaches_end) return;
    for (size_t i = run_begin; i < got->size(); ++i) apply(s, (*got)[i].second);
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
    const bool can_replay = !s.replay_endpoint.empty();
    if (!s.next_seq) {
      if (can_replay && seq > 0) catch_up(s, 0, seq, /*joining=*/true);
    } else if (seq < *s.next_seq) {
      forget(s, "restart");
    } else if (seq > *s.next_seq) {
      if (can_replay)
        catch_up(s, *s.next_seq, seq, /*joining=*/false);
      else
        forget(s, "gap");
    }
    s.next_seq = seq + 1;
    apply(s, frames[2].to_string_view());
    return true;
  };

  while (!stop_.load()) {
    // Workers added since the last turn (SIGHUP) get their socket; ids never change.
    const auto workers = pool_.all();
    for (; n_seen_workers < workers.size(); ++n_seen_workers) {
      const WorkerAddress& a = workers[n_seen_workers]->address;
      if (a.events_endpoint.empty()) continue;
      Subscription s{
          n_seen_workers,    a.url,  std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub), {},
          a.replay_endpoint, nullptr};
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
