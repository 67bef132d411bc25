// Request::cache_pin leases against FakeModelRunner (engine/pin_leases.h): a pinned prompt survives a
// flood that evicts an unpinned one, the quota refuses (and counts) pins beyond it, and a lease
// expires on the injected clock; Scheduler::check_integrity() after every step counts the pins.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/fake_model_runner.h"

namespace ds {
namespace {

using testing::FakeModelOptions;
using testing::FakeModelRunner;

std::vector<int32_t> distinct_prompt(int32_t n, int32_t which) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(2 + (which * 131 + i * 17) % 500);
  return p;
}

Request request(std::vector<int32_t> prompt, bool pin) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.stop.max_tokens = 4;
  r.stop.ignore_eos = true;
  r.detokenize = false;
  r.cache_pin = pin;
  r.cache_ttl_s = 100;
  return r;
}

TokenEvent run_one(Engine& engine, Request r) {
  RequestStream stream;
  Result<RequestId> id = engine.submit(std::move(r), stream.sink());
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  return id.ok() ? stream.collect() : TokenEvent{};
}

EngineStats settled_stats(const Engine& engine, int64_t requests_finished) {
  for (int i = 0; i < 1000 && engine.stats().requests_finished < requests_finished; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return engine.stats();
}

TEST(EngineCacheControl, PinnedPromptsSurviveEvictionWithinQuotaAndTtl) {
  FakeModelRunner model(FakeModelOptions{});
  std::atomic<int64_t> now{1000};
  EngineConfig cfg;
  cfg.scheduler.max_step_tokens = 64;
  cfg.scheduler.max_running = 4;
  cfg.block_size_tokens = 8;
  cfg.n_kv_blocks = 24;
  cfg.prefix_hash_seed = 42;
  cfg.check_integrity = true;
  cfg.max_pinned_blocks = 5;
  cfg.now_unix_s = [&now] { return now.load(); };
  Result<std::unique_ptr<Engine>> created = Engine::create(cfg, model, nullptr);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Engine& engine = **created;
  int64_t n_done = 0;
  auto ask = [&](int32_t which, bool pin) {
    const TokenEvent out = run_one(engine, request(distinct_prompt(41, which), pin));
    EXPECT_TRUE(out.error.ok()) << out.error.to_string();
    EXPECT_EQ(out.tokens, model.reference_greedy(distinct_prompt(41, which), 4));
    ++n_done;
    return out.usage.cached_prompt_tokens;
  };
  auto flood = [&] {
    for (int32_t k = 100; k < 110; ++k) ask(k, false);
  };

  // Control: an unpinned prompt is evicted by the flood.
  EXPECT_EQ(ask(1, false), 0);
  flood();
  EXPECT_EQ(ask(1, false), 0) << "evicted";

  // Pinned: its 5 full blocks stay; a second pin would pass the quota and runs unpinned.
  EXPECT_EQ(ask(2, true), 0);
  EXPECT_EQ(ask(3, true), 0);
  EngineStats s = settled_stats(engine, n_done);
  EXPECT_EQ(s.kv_pinned_blocks, 5);
  EXPECT_EQ(s.kv_pin_leases, 1);
  EXPECT_EQ(s.kv_pins_refused, 1);
  flood();
  EXPECT_EQ(ask(2, false), 40) << "5 pinned blocks of 8 survived";
  EXPECT_EQ(ask(3, false), 0) << "the refused pin was evicted";

  // Past the TTL the lease ends at the next step and the blocks are evictable again.
  now = 1000 + 101;
  ask(200, false);
  s = settled_stats(engine, n_done);
  EXPECT_EQ(s.kv_pinned_blocks, 0);
  EXPECT_EQ(s.kv_pin_leases, 0);
  flood();
  EXPECT_EQ(ask(2, false), 0) << "evicted once the lease expired";
}

TEST(EngineCacheControl, TtlBelowOneSecondIsRefused) {
  FakeModelRunner model(FakeModelOptions{});
  EngineConfig cfg;
  cfg.block_size_tokens = 8;
  cfg.n_kv_blocks = 16;
  Result<std::unique_ptr<Engine>> created = Engine::create(cfg, model, nullptr);
  ASSERT_TRUE(created.ok());
  Request r = request(distinct_prompt(9, 1), false);
  r.cache_ttl_s = 0;
  EXPECT_EQ((*created)->submit(std::move(r), [](TokenEvent&&) {}).status().code(),
            ErrorCode::engine_bad_request);
}

}  // namespace
}  // namespace ds
