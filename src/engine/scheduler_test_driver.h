// Test-only: a fake model for scheduler tests. It "samples" a token that is a pure function of
// (sequence, position), so a sequence recomputed after preemption must reproduce the same tokens,
// and checks each plan's structural invariants before handing the step back.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "engine/scheduler.h"

namespace ds::testing {

// The token the fake model samples for `seq_id` at output position `position`.
inline int32_t fake_token(SeqId seq_id, int64_t position) {
  uint64_t x = seq_id * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(position) * 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 31;
  return static_cast<int32_t>(x % 50000);
}

inline std::vector<int32_t> fake_sample(const StepPlan& plan) {
  std::vector<int32_t> sampled;
  sampled.reserve(plan.chunks.size());
  for (const ScheduledChunk& chunk : plan.chunks) {
    sampled.push_back(chunk.samples ? fake_token(chunk.seq_id, chunk.pos_begin + chunk.n_tokens) : -1);
  }
  return sampled;
}

// Checks that hold for every plan: budget, one chunk per sequence, sizes add up.
inline void expect_plan_well_formed(const StepPlan& plan, const SchedulerConfig& cfg) {
  int32_t n_tokens = 0;
  std::set<SeqId> seen;
  for (const ScheduledChunk& chunk : plan.chunks) {
    EXPECT_GT(chunk.n_tokens, 0) << "step " << plan.step_index << " seq " << chunk.seq_id;
    EXPECT_GE(chunk.pos_begin, 0);
    EXPECT_TRUE(seen.insert(chunk.seq_id).second)
        << "step " << plan.step_index << ": seq " << chunk.seq_id << " scheduled twice";
    n_tokens += chunk.n_tokens;
  }
  EXPECT_EQ(plan.n_tokens, n_tokens);
  EXPECT_LE(plan.n_tokens, cfg.max_step_tokens) << "step " << plan.step_index << " exceeds the token budget";
}

}  // namespace ds::testing
