// Scripted scheduler scenarios against the fake model (engine/scheduler_test_driver.h), with
// check_integrity() after every step.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/scheduler_test_driver.h"

namespace ds {
namespace {

using testing::expect_plan_well_formed;
using testing::fake_sample;
using testing::fake_token;
using namespace std::chrono_literals;

std::vector<int32_t> iota_prompt(int32_t n_tokens, int32_t first = 1) {
  std::vector<int32_t> prompt(static_cast<size_t>(n_tokens));
  std::iota(prompt.begin(), prompt.end(), first);
  return prompt;
}

SeqSpec spec(std::vector<int32_t> prompt, int32_t max_tokens) {
  SeqSpec s;
  s.prompt_tokens = std::move(prompt);
  s.max_tokens = max_tokens;
  return s;
}

struct Harness {
  Harness(SchedulerConfig sched_cfg, int32_t block_size, int32_t n_blocks)
      : kv(kv_config(block_size, n_blocks)), sched(sched_cfg, kv), cfg(sched_cfg) {}

  static KvCacheManagerConfig kv_config(int32_t block_size, int32_t n_blocks) {
    KvCacheManagerConfig c;
    c.block_size_tokens = block_size;
    c.n_blocks = n_blocks;
    c.process_seed = 42;
    return c;
  }

  // One synchronous step; finishes sequences that reached max_tokens, as the engine does.
  StepPlan step() {
    StepPlan plan = sched.schedule(now);
    expect_plan_well_formed(plan, cfg);
    sched.on_step_done(plan, fake_sample(plan));
    finish_completed(plan);
    const Status integrity = sched.check_integrity();
    EXPECT_TRUE(integrity.ok()) << integrity.to_string();
    now += 1ms;
    return plan;
  }

  void finish_completed(const StepPlan& plan) {
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (sched.contains(chunk.seq_id) && sched.n_generated(chunk.seq_id) == max_tokens.at(chunk.seq_id)) {
        finished_tokens[chunk.seq_id] =
            std::vector<int32_t>(sched.tokens(chunk.seq_id).begin(), sched.tokens(chunk.seq_id).end());
        sched.finish(chunk.seq_id);
      }
    }
  }

  Status add(SeqId seq_id, SeqSpec s) {
    max_tokens[seq_id] = s.max_tokens;
    return sched.add(seq_id, std::move(s));
  }

  void run_until_idle(int max_steps = 1000) {
    for (int i = 0; i < max_steps && (sched.n_running() + sched.n_waiting()) > 0; ++i) step();
    ASSERT_EQ(sched.n_running() + sched.n_waiting(), 0) << "work left after " << max_steps << " steps";
  }

  std::vector<int32_t> expected_tokens(SeqId seq_id, const std::vector<int32_t>& prompt) const {
    std::vector<int32_t> tokens = prompt;
    for (int32_t i = 0; i < max_tokens.at(seq_id); ++i) {
      tokens.push_back(fake_token(seq_id, static_cast<int64_t>(tokens.size())));
    }
    return tokens;
  }

  const ScheduledChunk* chunk_of(const StepPlan& plan, SeqId seq_id) {
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (chunk.seq_id == seq_id) return &chunk;
    }
    return nullptr;
  }

  KvCacheManager kv;
  Scheduler sched;
  SchedulerConfig cfg;
  SteadyTime now = SteadyTime{} + 1h;
  std::map<SeqId, int32_t> max_tokens;
  std::map<SeqId, std::vector<int32_t>> finished_tokens;
};

SchedulerConfig config(int32_t max_step_tokens, int32_t max_running = 8, int32_t max_waiting = 16) {
  SchedulerConfig cfg;
  cfg.max_step_tokens = max_step_tokens;
  cfg.max_running = max_running;
  cfg.max_waiting = max_waiting;
  cfg.max_seq_len = 256;
  return cfg;
}

TEST(Scheduler, AddValidatesAndRefusesWhenTheQueueIsFull) {
  Harness h(config(64, 8, 2), 4, 16);
  EXPECT_EQ(h.add(1, spec({}, 4)).code(), ErrorCode::engine_bad_request);
  EXPECT_EQ(h.add(1, spec({1, 2}, 0)).code(), ErrorCode::engine_bad_request);
  EXPECT_EQ(h.add(1, spec(iota_prompt(250), 10)).code(), ErrorCode::engine_bad_request);  // > max_seq_len
  EXPECT_EQ(h.add(1, spec(iota_prompt(60), 10)).code(), ErrorCode::engine_bad_request);   // > 16 blocks of 4
  ASSERT_TRUE(h.add(1, spec({1, 2}, 4)).ok());
  EXPECT_EQ(h.add(1, spec({1, 2}, 4)).code(), ErrorCode::invalid_argument);
  ASSERT_TRUE(h.add(2, spec({1, 2}, 4)).ok());
  const Status full = h.add(3, spec({1, 2}, 4));
  EXPECT_EQ(full.code(), ErrorCode::engine_overloaded);
  EXPECT_EQ(full.kind(), ErrorKind::retryable);
  EXPECT_EQ(h.sched.n_waiting(), 2);
  EXPECT_EQ(h.sched.stats().n_refused_overloaded, 1);
  h.step();  // both admitted: the queue has room again
  EXPECT_EQ(h.sched.n_waiting(), 0);
  EXPECT_TRUE(h.add(3, spec({1, 2}, 4)).ok());
  EXPECT_TRUE(h.sched.check_integrity().ok());
}

TEST(Scheduler, ChunkedPrefillThenDecodeGeneratesExactlyMaxTokens) {
  Harness h(config(8), 4, 32);
  const std::vector<int32_t> prompt = iota_prompt(20);
  ASSERT_TRUE(h.add(1, spec(prompt, 3)).ok());
  const std::vector<std::tuple<int64_t, int32_t, bool>> expected = {
      {0, 8, false}, {8, 8, false}, {16, 4, true}, {20, 1, true}, {21, 1, true}};
  for (const auto& [pos_begin, n_tokens, samples] : expected) {
    const StepPlan plan = h.step();
    ASSERT_EQ(plan.chunks.size(), 1u);
    EXPECT_EQ(plan.chunks[0].pos_begin, pos_begin);
    EXPECT_EQ(plan.chunks[0].n_tokens, n_tokens);
    EXPECT_EQ(plan.chunks[0].samples, samples);
    EXPECT_EQ(plan.chunks[0].replay_end, 0);
  }
  EXPECT_FALSE(h.sched.contains(1));
  EXPECT_EQ(h.finished_tokens.at(1), h.expected_tokens(1, prompt));
  EXPECT_EQ(h.kv.n_free_blocks(), 32);
  EXPECT_TRUE(h.step().chunks.empty());
}

TEST(Scheduler, PrefillTokensPendingCountsPromptWorkNotYetComputed) {
  Harness h(config(8), 4, 64);
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 0);
  ASSERT_TRUE(h.add(1, spec(iota_prompt(20), 3)).ok());
  ASSERT_TRUE(h.add(2, spec(iota_prompt(5, 100), 2)).ok());
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 25);  // both queued
  h.step();                                         // 8 prompt tokens of the first
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 17);
  h.step();
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 9);
  h.step();  // the first's last 4 (it samples), then 4 of the second's 5
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 1);
  h.step();  // the first decodes; the second's last prompt token: decode inputs are not prompt work
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 0);
  h.run_until_idle();
  EXPECT_EQ(h.sched.prefill_tokens_pending(), 0);
}

TEST(Scheduler, DecodeGoesFirstAndPrefillTakesTheRestOfTheBudget) {
  Harness h(config(10), 4, 64);
  for (SeqId id = 1; id <= 3; ++id)
    ASSERT_TRUE(h.add(id, spec(iota_prompt(3, 10 * static_cast<int32_t>(id)), 20)).ok());
  h.step();  // three prefills of 3 tokens
  ASSERT_TRUE(h.add(4, spec(iota_prompt(30, 500), 5)).ok());
  const StepPlan plan = h.step();
  ASSERT_EQ(plan.chunks.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(plan.chunks[i].n_tokens, 1);
    EXPECT_TRUE(plan.chunks[i].samples);
  }
  EXPECT_EQ(plan.chunks[3].seq_id, 4u);
  EXPECT_EQ(plan.chunks[3].pos_begin, 0);
  EXPECT_EQ(plan.chunks[3].n_tokens, 7);  // 10 - 3 decode tokens
  EXPECT_FALSE(plan.chunks[3].samples);
  EXPECT_EQ(plan.n_tokens, 10);
}

TEST(Scheduler, BudgetSmallerThanTheDecodersServesTheHighestRankedFirst) {
  Harness h(config(2), 4, 64);
  for (SeqId id = 1; id <= 3; ++id) {
    SeqSpec s = spec({static_cast<int32_t>(id)}, 10);
    s.priority = static_cast<int32_t>(id);  // 3 outranks 2 outranks 1
    ASSERT_TRUE(h.add(id, std::move(s)).ok());
  }
  h.step();
  h.step();  // admitted 3 and 2 then 1 (budget 2 per step)
  const StepPlan plan = h.step();
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq_id, 3u);
  EXPECT_EQ(plan.chunks[1].seq_id, 2u);
}

TEST(Scheduler, PrefixHitIsReportedAndSkipsTheCachedBlocks) {
  Harness h(config(64), 8, 32);
  const std::vector<int32_t> prompt = iota_prompt(40);
  ASSERT_TRUE(h.add(1, spec(prompt, 2)).ok());
  h.run_until_idle();
  EXPECT_EQ(h.sched.stats().n_admitted, 1);

  std::vector<int32_t> longer = prompt;
  longer.insert(longer.end(), {7, 7, 7});
  ASSERT_TRUE(h.add(2, spec(longer, 2)).ok());
  const StepPlan plan = h.step();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].pos_begin, 40);
  EXPECT_EQ(plan.chunks[0].n_tokens, 3);
  EXPECT_EQ(h.sched.cached_prompt_tokens(2), 40);

  // Same prompt, other salt: no hit.
  SeqSpec salted = spec(longer, 2);
  salted.cache_salt = "tenant-b";
  ASSERT_TRUE(h.add(3, std::move(salted)).ok());
  const StepPlan salted_plan = h.step();
  EXPECT_EQ(h.chunk_of(salted_plan, 3)->pos_begin, 0);
  EXPECT_EQ(h.sched.cached_prompt_tokens(3), 0);
  h.run_until_idle();
  EXPECT_EQ(h.finished_tokens.at(2), h.expected_tokens(2, longer));
  EXPECT_EQ(h.kv.n_free_blocks(), 32);
}

TEST(Scheduler, PreemptsTheLowestRankedByRecomputeAndResumesFromItsCachedPrefix) {
  // 10 blocks of 4 tokens; two sequences that each grow to 8 blocks cannot both fit.
  Harness h(config(64), 4, 10);
  const std::vector<int32_t> prompt_a = iota_prompt(12, 100);
  const std::vector<int32_t> prompt_b = iota_prompt(12, 200);
  ASSERT_TRUE(h.add(1, spec(prompt_a, 20)).ok());
  ASSERT_TRUE(h.add(2, spec(prompt_b, 20)).ok());
  bool preempted_b = false;
  for (int i = 0; i < 200 && h.sched.contains(1); ++i) {
    const StepPlan plan = h.step();
    for (const SeqId victim : plan.preempted) {
      EXPECT_EQ(victim, 2u) << "the later admitted sequence is the victim";
      preempted_b = true;
      EXPECT_FALSE(h.sched.is_running(2));
      EXPECT_TRUE(h.sched.block_table(2).empty());
    }
  }
  ASSERT_TRUE(preempted_b);
  EXPECT_GE(h.sched.n_preemptions(2), 1);
  // Seq 2 resumes: its first chunk after re-admission starts past 0 (its full blocks stayed cached)
  // and it recomputes the rest, generated tokens included.
  const StepPlan resume = h.step();
  const ScheduledChunk* chunk = h.chunk_of(resume, 2);
  ASSERT_NE(chunk, nullptr);
  EXPECT_GT(chunk->pos_begin, 0);
  EXPECT_EQ(chunk->pos_begin % 4, 0);
  EXPECT_TRUE(chunk->samples);
  h.run_until_idle();
  EXPECT_EQ(h.finished_tokens.at(1), h.expected_tokens(1, prompt_a));
  EXPECT_EQ(h.finished_tokens.at(2), h.expected_tokens(2, prompt_b));
  EXPECT_EQ(h.kv.n_free_blocks(), 10);
  EXPECT_GE(h.sched.stats().n_preemptions, 1);
}

TEST(Scheduler, HigherPriorityIsAdmittedFirstAndPreemptsLowerPriority) {
  Harness h(config(64, 1), 4, 16);
  ASSERT_TRUE(h.add(1, spec(iota_prompt(4), 2)).ok());
  SeqSpec urgent = spec(iota_prompt(4, 50), 2);
  urgent.priority = 5;
  ASSERT_TRUE(h.add(2, std::move(urgent)).ok());
  const StepPlan plan = h.step();  // max_running 1: only the urgent one runs
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq_id, 2u);

  // With blocks short, the low-priority sequence is the victim even though it was admitted first.
  Harness p(config(64), 4, 8);
  ASSERT_TRUE(p.add(1, spec(iota_prompt(8, 1), 20)).ok());
  p.step();
  SeqSpec high = spec(iota_prompt(8, 300), 20);
  high.priority = 1;
  ASSERT_TRUE(p.add(2, std::move(high)).ok());
  std::vector<SeqId> victims;
  for (int i = 0; i < 100 && p.sched.contains(2); ++i) {
    const StepPlan step = p.step();
    victims.insert(victims.end(), step.preempted.begin(), step.preempted.end());
  }
  ASSERT_FALSE(victims.empty());
  for (const SeqId victim : victims) EXPECT_EQ(victim, 1u);
  p.run_until_idle();
  EXPECT_EQ(p.kv.n_free_blocks(), 8);
}

TEST(Scheduler, ExpiredWorkIsDroppedQueuedOrRunningAndItsBlocksFreed) {
  Harness h(config(4, 1), 4, 16);
  SeqSpec running = spec(iota_prompt(8), 50);
  running.deadline = h.now + 3ms;
  ASSERT_TRUE(h.add(1, std::move(running)).ok());
  SeqSpec queued = spec(iota_prompt(8, 40), 5);
  queued.deadline = h.now + 1ms;
  ASSERT_TRUE(h.add(2, std::move(queued)).ok());
  EXPECT_TRUE(h.step().expired.empty());  // t = 0: seq 1 admitted, seq 2 queued (max_running 1)
  const StepPlan second = h.step();       // t = 1 ms: seq 2's deadline
  EXPECT_EQ(second.expired, std::vector<SeqId>{2});
  EXPECT_FALSE(h.sched.contains(2));
  EXPECT_TRUE(h.step().expired.empty());
  EXPECT_GT(h.kv.n_free_blocks(), 0);
  EXPECT_LT(h.kv.n_free_blocks(), 16);
  const StepPlan fourth = h.step();  // t = 3 ms: seq 1's deadline, while running
  EXPECT_EQ(fourth.expired, std::vector<SeqId>{1});
  EXPECT_TRUE(fourth.chunks.empty());
  EXPECT_EQ(h.kv.n_free_blocks(), 16);
  EXPECT_EQ(h.sched.stats().n_expired, 2);
}

TEST(Scheduler, FairShareAdmitsALightTenantAheadOfAHeavyTenantsBacklog) {
  Harness h(config(64, 2, 64), 4, 64);
  SeqId next_id = 1;
  for (int i = 0; i < 10; ++i) {
    SeqSpec s = spec(iota_prompt(4, 10 * i), 3);
    s.tenant = "heavy";
    ASSERT_TRUE(h.add(next_id++, std::move(s)).ok());
  }
  h.step();  // heavy's first two run and are charged
  SeqSpec light = spec(iota_prompt(4, 900), 3);
  light.tenant = "light";
  const SeqId light_id = next_id++;
  ASSERT_TRUE(h.add(light_id, std::move(light)).ok());
  // FIFO would admit light after all 8 queued heavy requests; fair share admits it at the next
  // free slot because heavy has been served more.
  int n_heavy_admitted_before_light = 0;
  for (int i = 0; i < 50 && h.sched.contains(light_id) && !h.sched.is_running(light_id); ++i) {
    const StepPlan plan = h.step();
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (chunk.seq_id == light_id) break;  // admissions later in the same plan came after it
      if (chunk.pos_begin == 0) ++n_heavy_admitted_before_light;
    }
  }
  EXPECT_EQ(n_heavy_admitted_before_light, 0);
  h.run_until_idle();
  EXPECT_EQ(h.finished_tokens.size(), 11u);
}

TEST(Scheduler, SwaReplayRecomputesTheLastWindowOfALongHitAndRefusesShortHits) {
  SchedulerConfig cfg = config(10);
  cfg.swa_replay_tokens = 16;
  Harness h(cfg, 8, 64);
  const std::vector<int32_t> prompt = iota_prompt(48);
  ASSERT_TRUE(h.add(1, spec(prompt, 1)).ok());
  h.run_until_idle();

  // Hit of 48 > 16: replay [32, 48) with replay_end 48, then the uncached suffix.
  std::vector<int32_t> longer = prompt;
  for (int i = 0; i < 10; ++i) longer.push_back(1000 + i);
  ASSERT_TRUE(h.add(2, spec(longer, 1)).ok());
  const std::vector<std::tuple<int64_t, int32_t, int64_t>> expected = {
      {32, 10, 48}, {42, 10, 48}, {52, 6, 0}};
  for (const auto& [pos_begin, n_tokens, replay_end] : expected) {
    const StepPlan plan = h.step();
    const ScheduledChunk* chunk = h.chunk_of(plan, 2);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->pos_begin, pos_begin);
    EXPECT_EQ(chunk->n_tokens, n_tokens);
    EXPECT_EQ(chunk->replay_end, replay_end);
    if (pos_begin == 32) {
      EXPECT_EQ(h.sched.cached_prompt_tokens(2), 48);
      // The cached blocks are shared, not copied: the replay must not rewrite them.
      for (size_t i = 0; i < 6; ++i) EXPECT_GE(h.kv.block_ref_count(h.sched.block_table(2)[i]), 1);
    }
  }
  h.run_until_idle();

  // A hit of 16 tokens (= the window) is not adopted: prefill from 0, nothing reported cached.
  std::vector<int32_t> short_share(prompt.begin(), prompt.begin() + 16);
  for (int i = 0; i < 8; ++i) short_share.push_back(2000 + i);
  ASSERT_TRUE(h.add(3, spec(short_share, 1)).ok());
  const StepPlan plan = h.step();
  EXPECT_EQ(h.chunk_of(plan, 3)->pos_begin, 0);
  EXPECT_EQ(h.chunk_of(plan, 3)->replay_end, 0);
  EXPECT_EQ(h.sched.cached_prompt_tokens(3), 0);
  // A hit of 24 > 16 is adopted: replay [8, 24).
  std::vector<int32_t> mid_share(prompt.begin(), prompt.begin() + 24);
  mid_share.push_back(3000);
  ASSERT_TRUE(h.add(4, spec(mid_share, 1)).ok());
  h.run_until_idle();
  EXPECT_EQ(h.finished_tokens.count(4), 1u);
  EXPECT_EQ(h.finished_tokens.at(4), h.expected_tokens(4, mid_share));
  EXPECT_EQ(h.kv.n_free_blocks(), 64);
}

// The V4 numbers: window 128, blocks of 128 (a multiple of both compression ratios, 4 and 128).
TEST(Scheduler, SwaReplayWithTheV4WindowPlansTheLast128TokensOfTheHit) {
  SchedulerConfig cfg = config(4096);
  cfg.swa_replay_tokens = 128;
  cfg.max_seq_len = 2048;
  Harness h(cfg, 128, 32);
  const std::vector<int32_t> prompt = iota_prompt(640);  // 5 full blocks
  ASSERT_TRUE(h.add(1, spec(prompt, 1)).ok());
  h.run_until_idle();
  struct Case {
    int32_t n_shared;    // prompt tokens shared with seq 1
    int64_t pos_begin;   // expected first position
    int64_t replay_end;  // expected replay_end (= adopted hit H)
  };
  const std::vector<Case> cases = {{640, 512, 640}, {300, 128, 256}, {200, 0, 0}, {128, 0, 0}};
  SeqId seq_id = 2;
  for (const Case& c : cases) {
    std::vector<int32_t> p(prompt.begin(), prompt.begin() + c.n_shared);
    for (int i = 0; i < 7; ++i) p.push_back(5000 + i);
    ASSERT_TRUE(h.add(seq_id, spec(p, 2)).ok());  // 2: still running after its first step
    const StepPlan plan = h.step();
    const ScheduledChunk* chunk = h.chunk_of(plan, seq_id);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->pos_begin, c.pos_begin) << "shared " << c.n_shared;
    EXPECT_EQ(chunk->replay_end, c.replay_end) << "shared " << c.n_shared;
    EXPECT_EQ(chunk->pos_begin + chunk->n_tokens, static_cast<int64_t>(p.size()));
    EXPECT_EQ(h.sched.cached_prompt_tokens(seq_id), c.replay_end);
    ++seq_id;
  }
  h.run_until_idle();
  EXPECT_EQ(h.kv.n_free_blocks(), 32);
}

TEST(Scheduler, AsyncModeSchedulesTheNextStepBeforeTheLastOneIsDone) {
  Harness h(config(6), 4, 32);
  const std::vector<int32_t> prompt = iota_prompt(10);
  ASSERT_TRUE(h.add(1, spec(prompt, 4)).ok());
  // Step 0: [0, 6). Step 1: [6, 10) samples. Step 2 is planned before step 1 is done: it consumes
  // the pending token at position 10 and samples again.
  StepPlan step0 = h.sched.schedule(h.now);
  h.sched.on_step_done(step0, fake_sample(step0));
  StepPlan step1 = h.sched.schedule(h.now);
  ASSERT_EQ(step1.chunks.size(), 1u);
  EXPECT_TRUE(step1.chunks[0].samples);
  StepPlan step2 = h.sched.schedule(h.now);
  ASSERT_EQ(step2.chunks.size(), 1u);
  EXPECT_EQ(step2.chunks[0].pos_begin, 10);
  EXPECT_EQ(step2.chunks[0].n_tokens, 1);
  EXPECT_TRUE(step2.chunks[0].samples);
  EXPECT_EQ(h.sched.tokens(1).size(), 10u);  // the pending value is not known yet
  ASSERT_TRUE(h.sched.check_integrity().ok());
  h.sched.on_step_done(step1, fake_sample(step1));
  EXPECT_EQ(h.sched.tokens(1).size(), 11u);
  StepPlan step3 = h.sched.schedule(h.now);
  h.sched.on_step_done(step2, fake_sample(step2));
  StepPlan step4 = h.sched.schedule(h.now);
  h.sched.on_step_done(step3, fake_sample(step3));
  // Four tokens are sampled (steps 1-4); the fifth plan is empty: max_tokens is covered by pending samples.
  StepPlan step5 = h.sched.schedule(h.now);
  EXPECT_TRUE(step5.chunks.empty());
  h.sched.on_step_done(step4, fake_sample(step4));
  h.sched.on_step_done(step5, fake_sample(step5));
  ASSERT_TRUE(h.sched.check_integrity().ok());
  EXPECT_EQ(h.sched.n_generated(1), 4);
  const std::vector<int32_t> tokens(h.sched.tokens(1).begin(), h.sched.tokens(1).end());
  EXPECT_EQ(tokens, h.expected_tokens(1, prompt));
}

TEST(Scheduler, FinishingASequenceInFlightDropsItsRowAndFreesItsBlocks) {
  Harness h(config(16), 4, 8);
  ASSERT_TRUE(h.add(1, spec(iota_prompt(10), 8)).ok());
  StepPlan step0 = h.sched.schedule(h.now);
  h.sched.finish(1);  // cancelled while step 0 runs
  EXPECT_EQ(h.kv.n_free_blocks(), 8);
  h.sched.on_step_done(step0, fake_sample(step0));
  EXPECT_FALSE(h.sched.contains(1));
  h.sched.finish(1);  // finishing twice is harmless (cancel racing completion)
  EXPECT_TRUE(h.sched.check_integrity().ok());
}

// Jump-forward (Scheduler::append_tokens): tokens appended after a sample are computed by the next chunk
// together with that sample, and the chunk samples at its end; then decoding goes on one token a step.
TEST(Scheduler, AppendedTokensAreComputedByTheNextChunkWhichSamples) {
  Harness h(config(64), 4, 32);
  ASSERT_TRUE(h.add(1, spec(iota_prompt(6), 10)).ok());
  StepPlan p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(h.sched.n_generated(1), 1);
  const std::vector<int32_t> forced = {900, 901, 902};
  h.sched.append_tokens(1, forced);
  EXPECT_EQ(h.sched.n_generated(1), 4);
  EXPECT_TRUE(h.sched.check_integrity().ok());
  p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].pos_begin, 6);
  EXPECT_EQ(p.chunks[0].n_tokens, 4);  // the sample and the three appended tokens
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(h.sched.n_generated(1), 5);
  EXPECT_EQ(h.sched.n_computed(1), 10);
  p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].pos_begin, 10);
  EXPECT_EQ(p.chunks[0].n_tokens, 1);
  // The appended tokens count towards max_tokens: 10 generated after 5 more steps, then it ends.
  for (int i = 0; i < 4; ++i) h.step();
  EXPECT_FALSE(h.sched.contains(1));
}

}  // namespace
}  // namespace ds
