// KvEventSubscriber against a real ZeroMQ PUB socket on loopback, messages in the publisher's three
// frames: batches land in the prefix index; a sequence gap and a sequence that goes back (a restarted
// worker) forget the worker's blocks; a frame that does not decode is counted, not applied.
#include "cluster/router/kv_event_subscriber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "cluster/router/testing/kv_event_pack.h"
#include "http/metrics_registry.h"

namespace ds::cluster {
namespace {

using namespace std::chrono_literals;

constexpr int kBlock = 4;

class Publisher {
 public:
  Publisher() {
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  void send(uint64_t seq, const std::string& payload) {
    unsigned char be[8];
    for (int i = 0; i < 8; ++i) be[i] = static_cast<unsigned char>(seq >> (56 - 8 * i));
    socket_.send(zmq::buffer(std::string("")), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(be, 8), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::pub};
  std::string endpoint_;
};

std::vector<int32_t> ids(int first, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

// One BlockStored run at position 0 under worker hashes [h, h + n).
std::string stored_batch(uint64_t h, const std::vector<int32_t>& tokens) {
  testing::Pack p;
  p.array(2).f64(0).array(1);
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < tokens.size() / kBlock; ++i) hashes.push_back(h + i);
  testing::stored(p, hashes, std::nullopt, tokens, kBlock);
  return p.bytes();
}

template <class F>
bool eventually(F cond) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

// ZeroMQ connects asynchronously: sends probe batches (numbers seq, seq + 1, ..., each storing its own
// 8 tokens at ids 9000 + 8 * number) until `arrived()`; seq ends past the last probe sent.
template <class Send, class Cond>
bool probe_until(uint64_t& seq, Send send, Cond arrived) {
  return eventually([&] {
    send(seq, stored_batch(1000 + seq * 10, ids(9000 + static_cast<int>(seq) * 8, 8)));
    ++seq;
    std::this_thread::sleep_for(5ms);
    return arrived();
  });
}

TEST(KvEventSubscriber, AppliesBatchesAndForgetsOnGapsAndRestarts) {
  Publisher pub;
  WorkerPool pool;
  WorkerAddress a = *parse_worker_url("http://127.0.0.1:1", "test");
  a.events_endpoint = pub.endpoint();
  pool.set_workers({a});
  server::MetricsRegistry registry;
  RouterMetrics metrics(registry, pool);
  RoutingConfig routing;
  routing.block_size_tokens = kBlock;
  RequestRouter router(pool, metrics, routing);
  KvEventSubscriber subscriber(pool, router, metrics, 10ms);
  const std::string url = a.url;
  auto batches = [&] { return metrics.kv_event_batches.with({url}).value(); };
  auto resets = [&](const char* why) { return metrics.kv_event_resets.with({url, why}).value(); };
  auto matched = [&](const std::vector<int32_t>& prompt) {
    return router.prefix_index().match(block_hashes(prompt, kBlock), 1)[0];
  };

  // ZeroMQ connects asynchronously: probes until one arrives (sequence numbers 0, 1, ... as a publisher
  // sends).
  uint64_t seq = 0;
  ASSERT_TRUE(probe_until(
      seq, [&](uint64_t n, const std::string& b) { pub.send(n, b); }, [&] { return batches() > 0; }));
  const std::vector<int32_t> prompt = ids(1, 12);  // 3 blocks
  pub.send(seq++, stored_batch(1, prompt));
  ASSERT_TRUE(eventually([&] { return matched(prompt) == 3u; }));
  EXPECT_EQ(resets("gap"), 0);

  // A gap: batch seq+1 missed; the worker's blocks are forgotten, the new batch applied.
  const std::vector<int32_t> other = ids(100, 8);
  pub.send(seq + 1, stored_batch(50, other));
  seq += 2;
  ASSERT_TRUE(eventually([&] { return resets("gap") == 1; }));
  ASSERT_TRUE(eventually([&] { return matched(other) == 2u; }));
  EXPECT_EQ(matched(prompt), 0u);

  // A restart: the numbers start at 0 again.
  pub.send(seq++, stored_batch(1, prompt));
  ASSERT_TRUE(eventually([&] { return matched(prompt) == 3u; }));
  pub.send(0, stored_batch(70, ids(500, 4)));
  ASSERT_TRUE(eventually([&] { return resets("restart") == 1; }));
  EXPECT_EQ(matched(prompt), 0u);
  EXPECT_EQ(matched(ids(500, 4)), 1u);

  // Garbage: counted, nothing applied, the stream goes on.
  pub.send(1, "not msgpack");
  ASSERT_TRUE(eventually([&] { return metrics.kv_event_errors.with({url}).value() == 1; }));
  pub.send(2, stored_batch(80, prompt));
  ASSERT_TRUE(eventually([&] { return matched(prompt) == 3u; }));
}

RoutingConfig routing_with_small_blocks() {
  RoutingConfig r;
  r.block_size_tokens = kBlock;
  return r;
}

// A worker's replay socket as kvcache/kv_event_publisher.h serves it (vLLM's protocol): a ROUTER
// answering [id, "", start] with [id, "", seq, payload] for each kept batch >= start, then the end
// marker. Its own thread; `keep` decides what it holds.
class ReplayServer {
 public:
  ReplayServer() {
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { run(); });
  }
  ~ReplayServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  void keep(uint64_t seq, std::string payload) {
    std::lock_guard lock(mu_);
    kept_[seq] = std::move(payload);
  }
  int requests() const { return requests_.load(); }

 private:
  static std::string be8(uint64_t v) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
    return b;
  }
  void run() {
    while (!stop_) {
      std::vector<zmq::pollitem_t> items{{socket_.handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq::poll(items, 10ms) <= 0) continue;
      std::vector<zmq::message_t> f;
      zmq::message_t m;
      do {
        (void)socket_.recv(m, zmq::recv_flags::none);
        f.push_back(std::move(m));
      } while (f.back().more());
      if (f.size() != 3 || f[2].size() != 8) continue;
      uint64_t start = 0;
      const auto* b = static_cast<const unsigned char*>(f[2].data());
      for (int i = 0; i < 8; ++i) start = (start << 8) | b[i];
      const std::string id = f[0].to_string();
      auto reply = [&](const std::string& seq, const std::string& payload) {
        socket_.send(zmq::buffer(id), zmq::send_flags::sndmore);
        socket_.send(zmq::message_t(), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(seq), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(payload), zmq::send_flags::none);
      };
      {
        std::lock_guard lock(mu_);
        for (auto it = kept_.lower_bound(start); it != kept_.end(); ++it) reply(be8(it->first), it->second);
      }
      reply(std::string(8, '\xff'), "");
      ++requests_;
    }
  }

  zmq::context_t context_{1};
  zmq::socket_t socket_{context_, zmq::socket_type::router};
  std::string endpoint_;
  std::mutex mu_;
  std::map<uint64_t, std::string> kept_;  // guarded by mu_
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends on the PUB socket and keeps for replay, as a publisher with a replay socket does.
struct ReplayingWorker {
  Publisher pub;
  ReplayServer replay;
  void send(uint64_t seq, const std::string& payload) {
    replay.keep(seq, payload);
    pub.send(seq, payload);
  }
};

struct SubscriberFixture {
  explicit SubscriberFixture(const ReplayingWorker& w) {
    WorkerAddress a = *parse_worker_url("http://127.0.0.1:1", "test");
    a.events_endpoint = w.pub.endpoint();
    a.replay_endpoint = w.replay.endpoint();
    url = a.url;
    pool.set_workers({a});
  }
  double replays(const char* outcome) { return metrics.kv_event_replays.with({url, outcome}).value(); }
  double resets(const char* why) { return metrics.kv_event_resets.with({url, why}).value(); }
  size_t matched(const std::vector<int32_t>& prompt) {
    return router.prefix_index().match(block_hashes(prompt, kBlock), 1)[0];
  }

  std::string url;
  WorkerPool pool;
  server::MetricsRegistry registry;
  RouterMetrics metrics{registry, pool};
  RoutingConfig routing = routing_with_small_blocks();
  RequestRouter router{pool, metrics, routing};
};

TEST(KvEventSubscriber, FillsAGapFromTheReplaySocketInsteadOfForgetting) {
  ReplayingWorker w;
  SubscriberFixture f(w);
  KvEventSubscriber subscriber(f.pool, f.router, f.metrics, 10ms);
  uint64_t seq = 0;
  ASSERT_TRUE(probe_until(
      seq, [&](uint64_t n, const std::string& b) { w.send(n, b); },
      [&] { return f.metrics.kv_event_batches.with({f.url}).value() > 0; }));
  ASSERT_TRUE(eventually([&] { return f.matched(ids(9000 + static_cast<int>(seq - 1) * 8, 8)) == 2u; }));
  // The probes the SUB socket missed while connecting were fetched as history ("filled" once or not at all).
  const double filled_before = f.replays("filled");
  const std::vector<int32_t> prompt = ids(1, 12);  // 3 blocks
  const std::vector<int32_t> missed = ids(200, 8);
  w.send(seq++, stored_batch(1, prompt));
  // Batch `seq` never reaches the SUB socket; the replay socket has it.
  w.replay.keep(seq++, stored_batch(60, missed));
  const std::vector<int32_t> after = ids(300, 4);
  w.send(seq++, stored_batch(90, after));
  ASSERT_TRUE(eventually([&] { return f.matched(after) == 1u; }));
  EXPECT_EQ(f.matched(missed), 2u);  // filled in, in order
  EXPECT_EQ(f.matched(prompt), 3u);  // nothing forgotten
  EXPECT_EQ(f.resets("gap"), 0);
  EXPECT_EQ(f.replays("filled"), filled_before + 1);

  // A gap the replay cannot cover (the batch is not kept): forgotten, then the stream goes on.
  ++seq;  // neither sent nor kept
  const std::vector<int32_t> later = ids(400, 8);
  w.send(seq++, stored_batch(120, later));
  ASSERT_TRUE(eventually([&] { return f.resets("gap") == 1; }));
  ASSERT_TRUE(eventually([&] { return f.matched(later) == 2u; }));
  EXPECT_EQ(f.matched(prompt), 0u);
  EXPECT_EQ(f.replays("partial"), 1);
}

TEST(KvEventSubscriber, ARouterThatStartsLateFetchesTheHistoryItMissed) {
  ReplayingWorker w;
  // Batches 0..2 went out before the router existed.
  const std::vector<int32_t> early = ids(1, 12);
  w.replay.keep(0, stored_batch(1, early));
  w.replay.keep(1, stored_batch(20, ids(50, 4)));
  w.replay.keep(2, stored_batch(30, ids(60, 8)));
  SubscriberFixture f(w);
  KvEventSubscriber subscriber(f.pool, f.router, f.metrics, 10ms);
  uint64_t seq = 3;
  ASSERT_TRUE(probe_until(
      seq, [&](uint64_t n, const std::string& b) { w.send(n, b); }, [&] { return f.matched(early) == 3u; }));
  EXPECT_EQ(f.matched(ids(60, 8)), 2u);
  EXPECT_GE(f.replays("filled"), 1);
  EXPECT_EQ(f.resets("gap"), 0);
  EXPECT_GE(w.replay.requests(), 1);
}

TEST(KvEventSubscriber, AReplaySocketThatDoesNotAnswerCountsAsFailedAndForgets) {
  Publisher pub;
  zmq::context_t ctx(1);
  zmq::socket_t silent(ctx, zmq::socket_type::router);  // bound, never answers
  silent.bind("tcp://127.0.0.1:*");
  WorkerPool pool;
  WorkerAddress a = *parse_worker_url("http://127.0.0.1:1", "test");
  a.events_endpoint = pub.endpoint();
  a.replay_endpoint = silent.get(zmq::sockopt::last_endpoint);
  pool.set_workers({a});
  server::MetricsRegistry registry;
  RouterMetrics metrics(registry, pool);
  RequestRouter router(pool, metrics, routing_with_small_blocks());
  KvEventSubscriber subscriber(pool, router, metrics, 10ms, 200ms);
  auto batches = [&] { return metrics.kv_event_batches.with({a.url}).value(); };
  uint64_t seq = 0;
  ASSERT_TRUE(probe_until(
      seq, [&](uint64_t n, const std::string& b) { pub.send(n, b); }, [&] { return batches() > 0; }));
  const double before = batches();
  pub.send(seq + 1, stored_batch(50, ids(100, 8)));  // a gap of one
  ASSERT_TRUE(eventually([&] { return metrics.kv_event_resets.with({a.url, "gap"}).value() == 1; }));
  EXPECT_GE(metrics.kv_event_replays.with({a.url, "failed"}).value(), 1);
  ASSERT_TRUE(eventually([&] { return batches() > before; }));  // the new batch still applied
}

}  // namespace
}  // namespace ds::cluster
