// Scheduler: decides, step by step, which sequences run and how many of their tokens — pure
// bookkeeping over KvCacheManager (no tensors, no token values beyond what prefix caching needs),
// tested against scripted steps without a model.
//
// Policy (docs/engine.md):
// - A per-step token budget (max_step_tokens). Decode first: every running sequence that has a
//   token to consume gets 1 token (highest ranked first while the budget lasts); the rest of the
//   budget goes to prefill chunks (chunked prefill), so a long prompt never stalls decoding.
//   Rank: higher priority, then earlier first admission.
// - Admission from a bounded waiting queue (engine/waiting_queue.h): highest priority first; within
//   a priority, preempted sequences first, then across tenants the one with the fewest tokens served
//   (fair share by virtual token counters, engine/tenant_share.h), FIFO within a tenant. A full queue
//   refuses add() with engine_overloaded (retryable). Admission needs blocks for the first chunk
//   and never preempts; the head of the queue waits (no overtaking) and nothing is admitted in a
//   step that had to preempt.
// - When blocks run out, the lowest-priority, most recently admitted running sequence is preempted
//   by recompute: its blocks are released (cached full blocks stay in the prefix index, so it often
//   resumes from its own prefix) and it returns to the front of its priority in the waiting queue.
//   Only a sequence ranked below the one that needs the blocks, not in flight and not yet holding a
//   chunk of this step, can be the victim; with none, a decode waits a step and a prefill chunk
//   shrinks to the blocks it can get.
// - Deadlines: a sequence whose deadline has passed (deadline <= now) is removed (queued or
//   running) and reported in StepPlan::expired.
// - SWA bounded replay (models with window attention; swa_replay_tokens = W > 0): a prefix hit of
//   H > W tokens keeps the cached paged blocks but recomputes positions [H - W, H) to rebuild the
//   window ring, with window attention cut at the replay start H - W (= replay_end - W); replayed
//   positions do not write paged caches (deepinfer-features.md §6). A hit of H <= W is not adopted:
//   the sequence is computed from position 0 (vLLM #56227's rule).
// - Generation stops being scheduled once max_tokens tokens are sampled (known or pending); the
//   engine calls finish() for it (and for EOS / stop strings, which the scheduler does not see).
//
// - KV tiers (docs/kvcache.md, Tiers; set_tier_lookup): on admission, after the pool's own prefix
//   match, the blocks that follow it are looked up in the tiers. A continuation of n blocks puts the
//   sequence in the "restoring" state: it leaves the queue holding its pool hit plus n fresh blocks,
//   and the plan lists a RestorePlan the engine fetches in the background. on_restored() registers
//   the blocks that arrived in the prefix index, releases the sequence's blocks (they stay cached)
//   and puts it back at its place in the queue, where the next admission hits them in the pool like
//   any cached prefix (SWA replay included). A sequence tries the tiers once.
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
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/request.h"
#include "engine/tenant_share.h"
#include "engine/waiting_queue.h"
#include "kvcache/kv_cache_manager.h"

namespace ds {

struct SchedulerConfig {
  int32_t max_step_tokens = 2048;  // token budget of one step (prefill chunk tokens + decode tokens)
  int32_t max_running = 64;        // sequences in the running set (the model's batch rows for decode)
  int32_t max_waiting = 1024;      // bounded admission queue; beyond it add() -> engine_overloaded
  int64_t max_seq_len = 4096;      // prompt + max_tokens must fit
  int32_t swa_replay_tokens = 0;   // 0: no window attention; V4: 128
  // Speculative decoding (docs/speculative.md): a decode chunk of a sequence with SeqSpec::speculate
  // also reserves up to this many draft positions after its token; 0 = off.
  int32_t num_speculative_tokens = 0;
};

// What the scheduler needs to know of a request (token values only for prefix caching).
struct SeqSpec {
  std::vector<int32_t> prompt_tokens;
  int32_t max_tokens = 0;
  int32_t priority = 0;
  std::optional<SteadyTime> deadline;
  std::string cache_salt;
  std::string tenant;
  bool speculate = false;  // decode chunks carry draft positions (SchedulerConfig::num_speculative_tokens)
  // An imported sequence state at this position (Request::state_import; 0: none): a prefix hit that
  // reaches it is adopted up to it, with no SWA replay, and the first chunk imports the state. Used
  // once: dropped on admission and on preemption.
  int64_t state_import_at = 0;
};

// One sequence's share of a step: positions [pos_begin, pos_begin + n_tokens).
struct ScheduledChunk {
  SeqId seq_id = 0;
  int64_t pos_begin = 0;
  int32_t n_tokens = 0;
  bool samples = false;    // the chunk reaches the sequence's last known token: sample one after it
  int64_t replay_end = 0;  // SWA bounded replay: positions < replay_end only rebuild the window ring
  // Speculative decoding: positions [pos_begin + n_tokens, + n_draft_tokens) are reserved (blocks,
  // budget) for draft tokens the engine proposes and verifies in this chunk; on_step_done says how
  // many were accepted. Only on a sampling decode chunk; never counted in n_scheduled until accepted.
  int32_t n_draft_tokens = 0;
  bool imports_state = false;  // the sequence's first chunk after an adopted state import (SeqSpec)
};

// Blocks [first_block, first_block + keys.size()) of a restoring sequence's table, to be filled from
// the KV tiers with the entries stored under keys (prev_key: the chain hash of block first_block - 1).
struct RestorePlan {
  SeqId seq_id = 0;
  int64_t first_block = 0;
  uint64_t prev_key = 0;
  std::vector<uint64_t> keys;
};

// How many leading keys the KV tiers hold (cheap; called on the scheduling thread).
using TierLookup = std::function<int64_t(std::span<const uint64_t> keys)>;

struct StepPlan {
  uint64_t step_index = 0;
  std::vector<ScheduledChunk> chunks;  // decode chunks first, then prefill chunks
  std::vector<SeqId> preempted;        // released their blocks this step; will recompute
  std::vector<SeqId> expired;          // deadline passed; removed from the scheduler
  std::vector<RestorePlan> restores;   // sequences that entered the restoring state this step
  int32_t n_tokens = 0;                // sum of chunk sizes (<= max_step_tokens)
};

// Counters since construction, for metrics (vLLM's num_preemptions and friends).
struct SchedulerStats {
  int64_t n_steps = 0;
  int64_t n_admitted = 0;  // admissions, re-admissions after preemption included
  int64_t n_preemptions = 0;
  int64_t n_expired = 0;
  int64_t n_refused_overloaded = 0;
  int64_t n_restores = 0;         // sequences sent to the KV tiers for a continuation
  int64_t n_restored_tokens = 0;  // tokens of blocks that arrived
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
  // Steps complete in the order they were planned. `plan` may omit chunks of the plan schedule()
  // returned (rows the engine dropped for sequences it is finishing, which it must then finish());
  // chunks of sequences already finished or expired are ignored.
  void on_step_done(const StepPlan& plan, std::span<const int32_t> sampled);
  // The same with speculative decoding: accepted_drafts[i] (empty, or one entry per chunk) are the
  // draft tokens of chunk i the target model accepted, in order (at most chunk.n_draft_tokens); they
  // precede sampled[i] in the sequence. The chunk's blocks beyond the accepted positions are
  // released (rollback of the rejected drafts) and only accepted positions are committed.
  void on_step_done(const StepPlan& plan, std::span<const int32_t> sampled,
                    std::span<const std::vector<int32_t>> accepted_drafts);
  // Jump-forward (docs/grammar.md): generated tokens the engine appends without sampling, after the
  // sequence's last sampled token, with nothing of it in flight (synchronous steps). The next chunk
  // computes them with that token and samples at its end.
  void append_tokens(SeqId seq_id, std::span<const int32_t> tokens);

  // Enables the KV tiers' read path (see the header comment); empty = off.
  void set_tier_lookup(TierLookup lookup) { tier_lookup_ = std::move(lookup); }
  // The restore of a RestorePlan finished: its first n_blocks_restored blocks hold their entries.
  // For a sequence removed while restoring (cancelled, expired), this releases its blocks.
  void on_restored(SeqId seq_id, int32_t n_blocks_restored);
  int32_t n_restoring() const { return n_restoring_; }

  // Removes a sequence (finished, cancelled): its blocks are released now. No-op for an unknown
  // id (already expired or finished), so cancellation may race completion.
  void finish(SeqId seq_id);

  bool contains(SeqId seq_id) const;
  // Prompt + generated tokens known so far.
  std::span<const int32_t> tokens(SeqId seq_id) const;
  int64_t n_generated(SeqId seq_id) const;
  int64_t n_computed(SeqId seq_id) const;            // positions whose KV rows are final
  int64_t cached_prompt_tokens(SeqId seq_id) const;  // prefix hit at first admission
  const std::vector<BlockId>& block_table(SeqId seq_id) const;

  int32_t n_waiting() const;
  int32_t n_running() const;
  // Prompt positions of every sequence here (queued, running or restoring) not computed yet: the
  // prefill work this engine still has (a preempted sequence counts what it must recompute; the
  // prefix cache's hits are only known at admission). O(sequences).
  int64_t prefill_tokens_pending() const;
  bool is_running(SeqId seq_id) const;
  int32_t n_preemptions(SeqId seq_id) const;  // times this sequence was preempted
  SchedulerStats stats() const { return stats_; }
  const SchedulerConfig& config() const { return cfg_; }
  // Speculative decoding: draft positions per decode chunk from the next schedule() on (the
  // engine's SpeculationPolicy turns it down on compute-bound steps); 0 = none.
  void set_num_speculative_tokens(int32_t k) { cfg_.num_speculative_tokens = k; }

  // Scheduler invariants plus KvCacheManager::check_integrity(); tests run it after every step.
  Status check_integrity() const;

 private:
  struct SeqState {
    SeqSpec spec;
    std::vector<int32_t> tokens;    // prompt + generated values known so far
    int32_t n_generated = 0;        // generated tokens whose values are known
    int32_t n_pending = 0;          // sampled by steps in flight; values not known yet
    int64_t n_scheduled = 0;        // positions [0, n_scheduled) computed or in flight
    int64_t n_computed = 0;         // positions [0, n_computed) whose step finished
    int64_t replay_end = 0;         // SWA bounded replay of the current admission (0: none)
    int32_t n_in_flight = 0;        // plans holding a chunk of this sequence, not yet done
    int32_t n_draft_in_flight = 0;  // of those, chunks with draft positions (their length is unknown)
    uint64_t last_step_scheduled = std::numeric_limits<uint64_t>::max();  // latest plan holding a chunk
    bool running = false;
    bool restoring = false;        // blocks are being filled from the KV tiers (neither queued nor running)
    bool restore_tried = false;    // the tiers were asked once; not again for this sequence
    uint64_t arrival_order = 0;    // add() order
    uint64_t admission_order = 0;  // first-admission order; 0 until first admitted
    int64_t cached_prompt_tokens = 0;
    int32_t n_preemptions = 0;

    int64_t n_known() const { return static_cast<int64_t>(tokens.size()) + n_pending; }
    // Generation is complete once every allowed token is sampled (known or pending).
    bool reached_max_tokens() const { return n_generated + n_pending >= spec.max_tokens; }
    // Positions that could run now: up to and including the last known (or pending) token.
    int64_t n_schedulable() const { return reached_max_tokens() ? 0 : n_known() - n_scheduled; }
  };

  const SeqState& state(SeqId seq_id) const;
  // Ranks running sequences: higher priority, then earlier first admission. True when a outranks b.
  static bool outranks(const SeqState& a, const SeqState& b);
  bool is_decode(const SeqState& seq) const;

  void expire(SteadyTime now, StepPlan& plan);
  // Blocks for seq to cover n_tokens_total positions, preempting lower-ranked sequences when the
  // pool is short. False when not enough could be found (nothing allocated then).
  bool reserve_blocks(SeqId seq_id, int64_t n_tokens_total, StepPlan& plan);
  // The lowest-ranked running sequence that may be preempted now and ranks below `than`.
  std::optional<SeqId> pick_victim(const SeqState& than, uint64_t step_index) const;
  void preempt(SeqId seq_id, StepPlan& plan);
  void schedule_running(StepPlan& plan, int32_t& budget_tokens, bool decode_phase);
  void admit(StepPlan& plan, int32_t& budget_tokens);
  // Starts a restore for the head of the queue when the tiers hold a continuation of its pool hit
  // and the pool has blocks for it. True when the sequence left the queue for the restoring state.
  bool try_start_restore(SeqId seq_id, SeqState& seq, const PrefixProbe& probe, StepPlan& plan);
  void add_chunk(SeqId seq_id, SeqState& seq, int32_t n_tokens, StepPlan& plan, int32_t& budget_tokens,
                 int32_t n_draft_tokens = 0);
  // Draft positions a decode chunk of seq may reserve now (0 when it does not speculate).
  int32_t draft_positions(const SeqState& seq, int32_t budget_tokens) const;
  void remove(SeqId seq_id);

  SchedulerConfig cfg_;
  KvCacheManager& kv_;
  std::unordered_map<SeqId, SeqState> seqs_;
  std::vector<SeqId> running_;  // admission order; re-sorted by rank in schedule()
  WaitingQueue waiting_;
  TenantShare share_;
  uint64_t next_step_index_ = 0;
  uint64_t next_done_step_index_ = 0;
  uint64_t next_arrival_order_ = 1;
  uint64_t next_admission_order_ = 1;
  SchedulerStats stats_;
  std::vector<BlockId> empty_table_;
  TierLookup tier_lookup_;
  int32_t n_restoring_ = 0;
};

}  // namespace ds
