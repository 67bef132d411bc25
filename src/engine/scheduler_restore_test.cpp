// The scheduler's KV tier read path (scheduler.h, "KV tiers"): a sequence whose prefix continues
// in a tier is parked in the restoring state with blocks for the continuation, comes back at its
// place in the queue once on_restored() reports, and then hits the restored blocks in the pool.
// check_integrity() after every call.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "engine/scheduler.h"
#include "engine/scheduler_test_driver.h"

namespace ds {
namespace {

using namespace std::chrono_literals;
using testing::fake_sample;

constexpr int32_t kBlock = 4;

KvCacheManagerConfig kv_config(int32_t n_blocks, uint64_t seed) {
  KvCacheManagerConfig c;
  c.block_size_tokens = kBlock;
  c.n_blocks = n_blocks;
  c.process_seed = seed;
  return c;
}

std::vector<int32_t> prompt_of(int32_t n_tokens) {
  std::vector<int32_t> prompt(static_cast<size_t>(n_tokens));
  std::iota(prompt.begin(), prompt.end(), 100);
  return prompt;
}

struct RestoreHarness {
  explicit RestoreHarness(int32_t swa_replay_tokens = 0, int32_t n_blocks = 32)
      : kv(kv_config(n_blocks, 7)),
        sched(SchedulerConfig{.max_step_tokens = 64,
                              .max_running = 8,
                              .max_waiting = 16,
                              .max_seq_len = 128,
                              .swa_replay_tokens = swa_replay_tokens},
              kv) {
    sched.set_tier_lookup([this](std::span<const uint64_t> keys) {
      ++n_lookups;
      int64_t n = 0;
      while (n < static_cast<int64_t>(keys.size()) && tier.contains(keys[static_cast<size_t>(n)])) ++n;
      return n;
    });
  }
  // The tier holds the first n_blocks blocks of `tokens` (salt "").
  void tier_holds(const std::vector<int32_t>& tokens, int64_t n_blocks) {
    for (const uint64_t key : kv.chain_hashes(tokens, "", n_blocks)) tier.insert(key);
  }
  StepPlan step() {
    StepPlan plan = sched.schedule(now);
    sched.on_step_done(plan, fake_sample(plan));
    check();
    now += 1ms;
    return plan;
  }
  void check() {
    const Status st = sched.check_integrity();
    EXPECT_TRUE(st.ok()) << st.to_string();
  }

  KvCacheManager kv;
  Scheduler sched;
  std::set<uint64_t> tier;
  int n_lookups = 0;
  SteadyTime now{};
};

SeqSpec spec_of(std::vector<int32_t> prompt) {
  SeqSpec s;
  s.prompt_tokens = std::move(prompt);
  s.max_tokens = 2;
  return s;
}

TEST(SchedulerRestore, AContinuationInATierIsRestoredThenHitInThePool) {
  RestoreHarness h;
  const std::vector<int32_t> prompt = prompt_of(5 * kBlock + 1);
  h.tier_holds(prompt, 3);
  ASSERT_TRUE(h.sched.add(1, spec_of(prompt)).ok());
  const StepPlan plan = h.step();
  ASSERT_EQ(plan.restores.size(), 1u);
  const RestorePlan& restore = plan.restores[0];
  EXPECT_EQ(restore.seq_id, 1u);
  EXPECT_EQ(restore.first_block, 0);
  EXPECT_EQ(restore.prev_key, 0u);
  EXPECT_EQ(restore.keys, h.kv.chain_hashes(prompt, "", 3));
  EXPECT_TRUE(plan.chunks.empty());
  EXPECT_EQ(h.sched.n_restoring(), 1);
  EXPECT_EQ(h.sched.n_waiting(), 0);
  EXPECT_EQ(h.sched.block_table(1).size(), 3u);
  const std::vector<BlockId> restored_blocks = h.sched.block_table(1);

  // Nothing is scheduled while the blocks are filled.
  EXPECT_TRUE(h.step().chunks.empty());
  h.sched.on_restored(1, 3);
  h.check();
  EXPECT_EQ(h.sched.n_restoring(), 0);
  const StepPlan resumed = h.step();
  ASSERT_EQ(resumed.chunks.size(), 1u);
  EXPECT_EQ(resumed.chunks[0].pos_begin, 3 * kBlock);
  EXPECT_EQ(h.sched.cached_prompt_tokens(1), 3 * kBlock);
  // The very blocks the restore filled are the sequence's prefix now.
  const std::vector<BlockId>& table = h.sched.block_table(1);
  EXPECT_TRUE(std::equal(restored_blocks.begin(), restored_blocks.end(), table.begin()));
  EXPECT_EQ(h.sched.stats().n_restored_tokens, 3 * kBlock);
  EXPECT_EQ(h.kv.stats().prefix_hit_tokens, 3 * kBlock);
}

TEST(SchedulerRestore, ThePoolHitComesFirstAndOnlyItsContinuationIsRestored) {
  RestoreHarness h;
  const std::vector<int32_t> prompt = prompt_of(6 * kBlock);
  // A first request computes 2 blocks into the pool.
  ASSERT_TRUE(
      h.sched.add(1, spec_of(std::vector<int32_t>(prompt.begin(), prompt.begin() + 2 * kBlock + 1))).ok());
  for (int i = 0; i < 4 && h.sched.contains(1); ++i) {
    h.step();
    if (h.sched.contains(1) && h.sched.n_generated(1) == 2) h.sched.finish(1);
  }
  h.tier_holds(prompt, 5);
  ASSERT_TRUE(h.sched.add(2, spec_of(prompt)).ok());
  const StepPlan plan = h.step();
  ASSERT_EQ(plan.restores.size(), 1u);
  EXPECT_EQ(plan.restores[0].first_block, 2);
  EXPECT_EQ(plan.restores[0].prev_key, h.kv.chain_hashes(prompt, "", 2)[1]);
  EXPECT_EQ(plan.restores[0].keys.size(), 3u);
  // Only one of three arrived: the hit is the pool's two blocks plus that one.
  h.sched.on_restored(2, 1);
  h.check();
  const StepPlan resumed = h.step();
  ASSERT_EQ(resumed.chunks.size(), 1u);
  EXPECT_EQ(resumed.chunks[0].pos_begin, 3 * kBlock);
  EXPECT_EQ(h.sched.cached_prompt_tokens(2), 3 * kBlock);
}

TEST(SchedulerRestore, NothingArrivesMeansRecomputeAndTheTiersAreAskedOnce) {
  RestoreHarness h;
  const std::vector<int32_t> prompt = prompt_of(4 * kBlock);
  h.tier_holds(prompt, 3);
  ASSERT_TRUE(h.sched.add(1, spec_of(prompt)).ok());
  ASSERT_EQ(h.step().restores.size(), 1u);
  h.sched.on_restored(1, 0);
  h.check();
  EXPECT_EQ(h.kv.stats().n_blocks_cached, 0) << "blocks that never arrived are not registered";
  const StepPlan resumed = h.step();
  ASSERT_EQ(resumed.chunks.size(), 1u);
  EXPECT_EQ(resumed.chunks[0].pos_begin, 0);
  EXPECT_TRUE(resumed.restores.empty());
  EXPECT_EQ(h.n_lookups, 1);
  EXPECT_EQ(h.sched.cached_prompt_tokens(1), 0);
}

TEST(SchedulerRestore, ASequenceRemovedWhileRestoringKeepsItsBlocksUntilTheRestoreEnds) {
  RestoreHarness h(/*swa_replay_tokens=*/0, /*n_blocks=*/8);
  const std::vector<int32_t> prompt = prompt_of(4 * kBlock);
  h.tier_holds(prompt, 3);
  ASSERT_TRUE(h.sched.add(1, spec_of(prompt)).ok());
  ASSERT_EQ(h.step().restores.size(), 1u);
  h.sched.finish(1);  // cancelled
  h.check();
  EXPECT_EQ(h.kv.n_free_blocks(), 5) << "the restore thread may still write its 3 blocks";
  h.sched.on_restored(1, 3);
  h.check();
  EXPECT_EQ(h.kv.n_free_blocks(), 8);
  EXPECT_FALSE(h.kv.is_open(1));
}

TEST(SchedulerRestore, AContinuationTheSwaRuleWouldNotAdoptIsNotFetched) {
  RestoreHarness h(/*swa_replay_tokens=*/2 * kBlock);
  const std::vector<int32_t> prompt = prompt_of(6 * kBlock);
  h.tier_holds(prompt, 2);  // 2 blocks = W tokens: a hit of H <= W is never adopted
  ASSERT_TRUE(h.sched.add(1, spec_of(prompt)).ok());
  const StepPlan plan = h.step();
  EXPECT_TRUE(plan.restores.empty());
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].pos_begin, 0);

  RestoreHarness longer(/*swa_replay_tokens=*/2 * kBlock);
  longer.tier_holds(prompt, 4);
  ASSERT_TRUE(longer.sched.add(1, spec_of(prompt)).ok());
  ASSERT_EQ(longer.step().restores.size(), 1u);
  longer.sched.on_restored(1, 4);
  const StepPlan resumed = longer.step();
  ASSERT_EQ(resumed.chunks.size(), 1u);
  EXPECT_EQ(resumed.chunks[0].pos_begin, 2 * kBlock) << "the last window of the hit is replayed";
  EXPECT_EQ(resumed.chunks[0].replay_end, 4 * kBlock);
}

TEST(SchedulerRestore, KvPinsCountAsReferencesInTheIntegrityCheck) {
  KvCacheManager kv(kv_config(4, 1));
  const std::vector<int32_t> prompt = prompt_of(2 * kBlock + 1);
  kv.open(1, prompt, "");
  ASSERT_TRUE(kv.grow(1, 2 * kBlock + 1).ok());
  kv.commit(1, std::span<const int32_t>(prompt).first(2 * kBlock));
  const BlockId first = kv.block_table(1)[0];
  kv.pin(first);
  kv.close(1);
  EXPECT_TRUE(kv.check_integrity().ok());
  EXPECT_EQ(kv.block_ref_count(first), 1);
  EXPECT_EQ(kv.n_free_blocks(), 3) << "a pinned block is not reusable";
  kv.unpin(first);
  EXPECT_TRUE(kv.check_integrity().ok());
  EXPECT_EQ(kv.n_free_blocks(), 4);
  EXPECT_TRUE(kv.is_block_cached(first)) << "unpinning keeps it cached";
}

// Random arrivals over shared prefixes, a tier that learns every committed block (the write path),
// restores that complete after random delays with a random number of blocks (failures included),
// cancels while restoring: check_integrity() after every step, every sequence generates exactly its
// tokens, and the pool ends with every block free.
TEST(SchedulerRestore, RandomRestoresKeepEveryInvariant) {
  for (const int32_t swa : {0, 2 * kBlock}) {
    RestoreHarness h(swa, /*n_blocks=*/40);
    std::mt19937 rng(17 + static_cast<uint32_t>(swa));
    std::map<SeqId, std::pair<int, int32_t>> pending;  // restoring seq -> (steps left, blocks asked)
    std::map<SeqId, int32_t> max_tokens;
    SeqId next_id = 1;
    int n_restores = 0, n_partial = 0, n_cancelled_restoring = 0;
    for (int step = 0; step < 3000; ++step) {
      if (step < 2400 && rng() % 3 == 0 && h.sched.n_waiting() < 12) {
        std::vector<int32_t> prompt =
            prompt_of(static_cast<int32_t>(kBlock * (3 + rng() % 5) + rng() % kBlock));
        prompt[prompt.size() - 1] = static_cast<int32_t>(rng() % 1000);  // own last token
        if (rng() % 4 == 0)
          prompt[static_cast<size_t>(kBlock * (1 + rng() % 2))] = static_cast<int32_t>(rng() % 7);
        SeqSpec s = spec_of(prompt);
        s.max_tokens = 1 + static_cast<int32_t>(rng() % 6);
        max_tokens[next_id] = s.max_tokens;
        ASSERT_TRUE(h.sched.add(next_id++, std::move(s)).ok());
      }
      const StepPlan plan = h.sched.schedule(h.now);
      for (const RestorePlan& r : plan.restores) {
        pending[r.seq_id] = {1 + static_cast<int>(rng() % 4), static_cast<int32_t>(r.keys.size())};
        ++n_restores;
      }
      h.sched.on_step_done(plan, fake_sample(plan));
      // The write path: the tier learns every block a running sequence has committed.
      for (const ScheduledChunk& c : plan.chunks) {
        if (h.kv.is_open(c.seq_id))
          for (const uint64_t key : h.kv.block_hashes(c.seq_id)) h.tier.insert(key);
        if (h.sched.contains(c.seq_id) && h.sched.n_generated(c.seq_id) == max_tokens.at(c.seq_id)) {
          const auto tokens = h.sched.tokens(c.seq_id);
          for (size_t p = tokens.size() - static_cast<size_t>(max_tokens.at(c.seq_id)); p < tokens.size();
               ++p)
            ASSERT_EQ(tokens[p], testing::fake_token(c.seq_id, static_cast<int64_t>(p)))
                << "seq " << c.seq_id;
          h.sched.finish(c.seq_id);
        }
      }
      for (auto it = pending.begin(); it != pending.end();) {
        if (--it->second.first > 0) {
          ++it;
          continue;
        }
        if (rng() % 8 == 0 && h.sched.contains(it->first)) {
          h.sched.finish(it->first);  // cancelled while restoring; the restore still ends later
          ++n_cancelled_restoring;
        }
        const int32_t n_ok =
            rng() % 3 == 0 ? static_cast<int32_t>(rng() % (it->second.second + 1)) : it->second.second;
        if (n_ok < it->second.second) ++n_partial;
        h.sched.on_restored(it->first, n_ok);
        it = pending.erase(it);
      }
      h.check();
      if (::testing::Test::HasFailure()) return;
      h.now += 1ms;
      if (step >= 2400 && pending.empty() && h.sched.n_running() + h.sched.n_waiting() == 0) break;
    }
    EXPECT_EQ(h.sched.n_running() + h.sched.n_waiting() + h.sched.n_restoring(), 0);
    EXPECT_EQ(h.kv.n_free_blocks(), 40) << "every block released";
    EXPECT_GT(n_restores, 20) << "the scenario must exercise restores";
    EXPECT_GT(n_partial, 0);
    EXPECT_GT(n_cancelled_restoring, 0);
  }
}

}  // namespace
}  // namespace ds
