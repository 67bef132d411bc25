// Scheduler bookkeeping of speculative decoding (docs/speculative.md): draft positions reserved on
// decode chunks within the budget, the free blocks and max_tokens; accepted drafts appended before
// the sample; the blocks of rejected positions released; never a preemption for drafts.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/scheduler.h"

namespace ds {
namespace {

KvCacheManagerConfig kv_config(int32_t block_size, int32_t n_blocks) {
  KvCacheManagerConfig c;
  c.block_size_tokens = block_size;
  c.n_blocks = n_blocks;
  c.process_seed = 7;
  return c;
}

SeqSpec speculating(int32_t n_prompt, int32_t max_tokens, int32_t first_token) {
  SeqSpec s;
  s.prompt_tokens.resize(static_cast<size_t>(n_prompt));
  std::iota(s.prompt_tokens.begin(), s.prompt_tokens.end(), first_token);
  s.max_tokens = max_tokens;
  s.speculate = true;
  return s;
}

TEST(SchedulerSpeculative, DraftsAreReservedAcceptedAndRolledBack) {
  KvCacheManager kv(kv_config(4, 32));
  SchedulerConfig cfg{.max_step_tokens = 64, .max_running = 4, .max_waiting = 8, .max_seq_len = 128};
  cfg.num_speculative_tokens = 3;
  Scheduler sched(cfg, kv);
  ASSERT_TRUE(sched.add(1, speculating(6, 13, 100)).ok());
  std::vector<int32_t> want(6);
  std::iota(want.begin(), want.end(), 100);
  SteadyTime now{};
  int step = 0;
  int n_draft_steps = 0;
  while (sched.contains(1) && sched.n_generated(1) < 13) {
    const StepPlan plan = sched.schedule(now);
    ASSERT_EQ(plan.chunks.size(), 1u);
    const ScheduledChunk& c = plan.chunks[0];
    const int64_t room = 13 - sched.n_generated(1) - 1;
    EXPECT_LE(c.n_draft_tokens, std::min<int64_t>(3, room)) << "drafts past max_tokens";
    if (c.n_draft_tokens > 0) {
      ++n_draft_steps;
      EXPECT_EQ(c.n_tokens, 1);
      EXPECT_EQ(plan.n_tokens, 1 + c.n_draft_tokens) << "drafts count against the budget";
      EXPECT_GE(static_cast<int64_t>(sched.block_table(1).size()) * 4, c.pos_begin + 1 + c.n_draft_tokens)
          << "draft positions need blocks";
    }
    // Accept 0, 1, 2, ... drafts in turn (at most what was planned).
    const int32_t n_accept = std::min(c.n_draft_tokens, step % 4);
    std::vector<std::vector<int32_t>> accepted(1);
    for (int32_t j = 0; j < n_accept; ++j) accepted[0].push_back(500 + step * 10 + j);
    const int32_t sample = 900 + step;
    sched.on_step_done(plan, std::vector<int32_t>{sample}, accepted);
    if (c.samples) {
      want.insert(want.end(), accepted[0].begin(), accepted[0].end());
      want.push_back(sample);
    }
    const Status integrity = sched.check_integrity();
    ASSERT_TRUE(integrity.ok()) << integrity.to_string();
    // Rollback: the table holds exactly the kept positions (the last sample is not computed yet).
    const int64_t kept = c.pos_begin + c.n_tokens + n_accept;
    EXPECT_EQ(sched.n_computed(1), kept);
    if (c.n_draft_tokens > 0) {
      EXPECT_EQ(static_cast<int64_t>(sched.block_table(1).size()), (kept + 3) / 4);
    }
    ++step;
  }
  EXPECT_GT(n_draft_steps, 2);
  ASSERT_TRUE(sched.contains(1));
  EXPECT_EQ(sched.n_generated(1), 13);
  const std::span<const int32_t> tokens = sched.tokens(1);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.end()), want);
  sched.finish(1);
  EXPECT_EQ(kv.n_free_blocks(), 32);
  EXPECT_TRUE(sched.check_integrity().ok());
}

TEST(SchedulerSpeculative, DraftsTakeWhatTheBudgetAndFreeBlocksLeave) {
  KvCacheManager kv(kv_config(4, 4));  // 16 positions in all
  SchedulerConfig cfg{.max_step_tokens = 5, .max_running = 4, .max_waiting = 8, .max_seq_len = 16};
  cfg.num_speculative_tokens = 3;
  Scheduler sched(cfg, kv);
  ASSERT_TRUE(sched.add(1, speculating(3, 5, 10)).ok());
  ASSERT_TRUE(sched.add(2, speculating(3, 5, 20)).ok());
  SteadyTime now{};
  // Prefill both, then decode with drafts: 2 sequences x (1 + 3) > a budget of 5, and 4 blocks
  // cannot hold two sequences' drafts either.
  int n_cut_steps = 0;
  for (int i = 0; i < 12 && (sched.contains(1) || sched.contains(2)); ++i) {
    const StepPlan plan = sched.schedule(now);
    EXPECT_LE(plan.n_tokens, 5);
    EXPECT_TRUE(plan.preempted.empty()) << "speculation never preempts";
    int32_t n_decode = 0;
    int32_t n_drafts = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.samples || c.n_tokens != 1) continue;
      ++n_decode;
      n_drafts += c.n_draft_tokens;
      EXPECT_LE(c.n_draft_tokens, 5 - 1 - sched.n_generated(c.seq_id)) << "drafts past max_tokens";
      EXPECT_GE(static_cast<int64_t>(sched.block_table(c.seq_id).size()) * 4,
                c.pos_begin + 1 + c.n_draft_tokens);
    }
    if (n_decode == 2 && n_drafts < 6) ++n_cut_steps;
    std::vector<int32_t> sampled(plan.chunks.size(), 1);
    sched.on_step_done(plan, sampled, std::vector<std::vector<int32_t>>(plan.chunks.size()));
    for (const ScheduledChunk& c : plan.chunks) {
      if (sched.contains(c.seq_id) && sched.n_generated(c.seq_id) >= 5) sched.finish(c.seq_id);
    }
    const Status integrity = sched.check_integrity();
    ASSERT_TRUE(integrity.ok()) << integrity.to_string();
  }
  EXPECT_GT(n_cut_steps, 0);
  EXPECT_FALSE(sched.contains(1));
  EXPECT_FALSE(sched.contains(2));
  EXPECT_EQ(kv.n_free_blocks(), 4);
}

}  // namespace
}  // namespace ds
