// KvEventSubscriber against a real ZeroMQ PUB socket on loopback, messages in the publisher's three
// frames: batches land in the prefix index; a sequence gap and a sequence that goes back (a restarted
// worker) forget the worker's blocks; a frame that does not decode is counted, not applied.
#include "cluster/router/kv_event_subscriber.h"

#include <gtest/gtest.h>

#include <chrono>
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
  ASSERT_TRUE(eventually([&] {
    pub.send(seq, stored_batch(1000 + seq * 10, ids(9000 + static_cast<int>(seq) * 8, 8)));
    ++seq;
    std::this_thread::sleep_for(5ms);
    return batches() > 0;
  }));
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

}  // namespace
}  // namespace ds::cluster
