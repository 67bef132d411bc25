// Scheduler: decides, step by step, which sequences run and how many of their tokens — pure
// bookkeeping over KvCacheManager (no tensors, no token values beyond what prefix caching needs),
// tested against scripted steps without a model.
//
// Policy (docs/engine.md):
// - A per-step token budget (max_step_tokens). Decode first: every running sequence that has a
//   token to consume gets 1 token; the rest of the budget goes to prefill chunks (chunked prefill),
//   so a long prompt never stalls decoding.
// - Admission from a bounded waiting queue: highest priority first, FIFO within a priority, and
//   across tenants of equal priority the tenant with the fewest tokens served recently goes first
//   (fair share). A full queue refuses add() with engine_overloaded (retryable).
// - When blocks run out, the lowest-priority, most recently admitted running sequence is preempted
//   by recompute: its blocks are released (cached full blocks stay in the prefix index, so it often
//   resumes from its own prefix) and it returns to the front of its priority in the waiting queue.
// - Deadlines: a sequence whose deadline has passed is removed (queued or running) and reported in
//   StepPlan::expired.
// - SWA bounded replay (models with window attention; swa_replay_tokens > 0): a prefix hit of H
//   tokens keeps the cached paged blocks but recomputes positions [H - swa_replay_tokens, H) to
//   rebuild the window ring, with window attention cut at the replay start; replayed positions do
//   not write paged caches (deepinfer-features.md §6).
//
// Async scheduling: schedule() for step N+1 may be called before on_step_done() of step N. A
// sequence whose chunk in step N samples a token counts that token as pending; in step N+1 its
// decode chunk consumes it (the engine fills in the value when step N's sample is known). A
// sequence finished by step N's token was already scheduled in N+1: the engine drops that row.
// Sequences in flight are never preempted (their blocks are being written).
//
// Not thread-safe: owned by the engine's scheduling thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/request.h"
#include "kvcache/kv_cache_manager.h"

namespace ds {

struct SchedulerConfig {
  int32_t max_step_tokens = 2048;  // token budget of one step (prefill chunk tokens + decode tokens)
  int32_t max_running = 64;        // sequences in the running set (the model's batch rows for decode)
  int32_t max_waiting = 1024;      // bounded admission queue; beyond it add() -> engine_overloaded
  int64_t max_seq_len = 4096;      // prompt + max_tokens must fit
  int32_t swa_replay_tokens = 0;   // 0: no window attention; V4: 128
};

// What the scheduler needs to know of a request (token values only for prefix caching).
struct SeqSpec {
  std::vector<int32_t> prompt_tokens;
  int32_t max_tokens = 0;
  int32_t priority = 0;
  std::optional<SteadyTime> deadline;
  std::string cache_salt;
  std::string tenant;
};

// One sequence's share of a step: positions [pos_begin, pos_begin + n_tokens).
struct ScheduledChunk {
  SeqId seq_id = 0;
  int64_t pos_begin = 0;
  int32_t n_tokens = 0;
  bool samples = false;     // the chunk reaches the sequence's last known token: sample one after it
  int64_t replay_end = 0;   // SWA bounded replay: positions < replay_end only rebuild the window ring
};

struct StepPlan {
  uint64_t step_index = 0;
  std::vector<ScheduledChunk> chunks;  // decode chunks first, then prefill chunks
  std::vector<SeqId> preempted;        // released their blocks this step; will recompute
  std::vector<SeqId> expired;          // deadline passed; removed from the scheduler
  int32_t n_tokens = 0;                // sum of chunk sizes (<= max_step_tokens)
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, KvCacheManager& kv);

  // Queues a sequence. engine_overloaded (retryable) when the queue is full; engine_bad_request
  // (user) when the prompt is empty or prompt + max_tokens exceeds max_seq_len.
  Status add(SeqId seq_id, SeqSpec spec);

  // Plans the next step at time `now` (admission, preemption, expiry included).
  StepPlan schedule(SteadyTime now);

  // Step `plan` finished; sampled[i] is the token sampled for plan.chunks[i] (ignored when that
  // chunk does not sample). Registers newly computed full blocks for prefix caching.
  void on_step_done(const StepPlan& plan, std::span<const int32_t> sampled);

  // Removes a sequence (finished, cancelled): its blocks are released now.
  void finish(SeqId seq_id);

  bool contains(SeqId seq_id) const;
  // Prompt + generated tokens known so far.
  std::span<const int32_t> tokens(SeqId seq_id) const;
  int64_t n_generated(SeqId seq_id) const;
  int64_t cached_prompt_tokens(SeqId seq_id) const;  // prefix hit at first admission
  const std::vector<BlockId>& block_table(SeqId seq_id) const;

  int32_t n_waiting() const;
  int32_t n_running() const;

  // Scheduler invariants plus KvCacheManager::check_integrity(); tests run it after every step.
  Status check_integrity() const;
};

}  // namespace ds
