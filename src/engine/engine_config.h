// EngineConfig: how an Engine sizes its KV cache and runs its step loop; EngineStats: the snapshot
// the metrics endpoint and benchmarks read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/page_memory.h"
#include "engine/drafter.h"
#include "engine/scheduler.h"
#include "engine/speculative_config.h"
#include "kvcache/kv_tier.h"
#include "kvcache/tier_ttl.h"

namespace ds {

// The KV tiers of an engine. The engine derives the tier namespace (kvcache/tier_key.h) from the
// model fingerprint, the model's KV layout tag and bytes per block and the block size once its
// cache exists, opens the tiers for it, and uses tier_prefix_seed(secret, namespace) as its prefix
// hash seed (prefix_hash_seed is then ignored), so another process with the same secret and model
// computes the same keys.
struct KvTierConfig {
  uint64_t model_fingerprint = 0;  // config + tensor table of the checkpoint (the caller computes it)
  std::vector<std::byte> secret;   // load_or_create_tier_secret()
  std::function<Result<std::vector<std::shared_ptr<KvTier>>>(uint64_t namespace_id)> open;
  bool writes = true;              // false: tiers are only read (the benchmark's baseline)
  int32_t max_queued_writes = 64;  // write jobs queued beyond this are dropped and counted
  // A long output's committed blocks go down every this many tokens (and at its end), not only at
  // its end (DeepSeek persists "at fixed token intervals inside long outputs"); 0 = at the end only.
  int64_t write_every_tokens = 1024;
  TierTtlPolicy ttl;                    // entry TTL by Request::cache_class
  std::function<int64_t()> now_unix_s;  // expiry clock; empty = the system clock (tests inject one)
};

struct EngineConfig {
  // max_seq_len 0 = the model's max_position_embeddings (capped by the KV cache's capacity).
  SchedulerConfig scheduler{
      .max_step_tokens = 2048, .max_running = 64, .max_waiting = 1024, .max_seq_len = 0};
  // Must be a multiple of the model's KvCacheLayout::block_size_multiple; 0 = default_block_size_tokens().
  int32_t block_size_tokens = 0;
  int32_t n_kv_blocks = 0;  // 0: as many as kv_cache_bytes holds
  int64_t kv_cache_bytes = int64_t{1} << 30;
  // Where the KV pool's pages live (KvCacheConfig::memory; null: the heap).
  std::shared_ptr<PageMemory> kv_memory;
  bool enable_prefix_caching = true;
  uint64_t prefix_hash_seed = 0;  // per process; callers pick a random one (tests fix it)
  // Plan step N+1 and emit step N-1's events while step N's forward runs (deepinfer-features §7).
  bool async_scheduling = true;
  // Scheduler::check_integrity() after every step; a violation ends every request with `internal`.
  bool check_integrity = false;
  std::vector<int32_t> extra_eos_token_ids;  // besides config.json's and the tokenizer's EOS
  // KV tiers below the pool (docs/kvcache.md, Tiers); off without kv_tiers.open.
  KvTierConfig kv_tiers;
  // Speculative decoding (docs/speculative.md). On: decode chunks of eligible requests carry up to k
  // drafts verified in the same forward (fewer or none on steps where SpeculationPolicy says
  // drafting does not pay). Requests with a grammar or penalties run without drafts.
  SpeculativeConfig speculative;
  // Jump-forward decoding (docs/grammar.md): where a request's grammar forces the next bytes, their
  // tokens are appended without sampling (the last one left to the model). On: the step loop runs
  // synchronously, as with speculative decoding (the next step is planned once the tokens are known).
  bool jump_forward = false;
  // Replaces the method's drafter (tests drive the engine with scripted drafts); needs
  // speculative.enabled(). Used by the thread running steps only (the executor under async).
  std::shared_ptr<Drafter> drafter;
  // Called on the engine thread just before a running sequence's blocks are released (finished,
  // cancelled): its block table and how many positions hold final KV rows. No forward is writing
  // them then. Inspection for tests; empty = none.
  std::function<void(uint64_t request_id, std::span<const int32_t> block_table, int64_t n_computed)>
      on_sequence_release;
  // Pool blocks Request::cache_pin may hold at once; -1 = a quarter of the pool, 0 = pins refused.
  int32_t max_pinned_blocks = -1;
  // Clock of pin leases (unix seconds); empty = the system clock (tests inject one).
  std::function<int64_t()> now_unix_s;
  // KV events (docs/kvcache.md, KV events): the pool's index changes, in order, called on the engine
  // thread once per loop iteration that had some; must not block (kvcache/kv_event_publisher.h queues).
  std::function<void(std::vector<KvCacheEvent>&&)> kv_event_sink;
};

struct EngineStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;  // queued in the scheduler or not yet picked up from the inbox
  // Prompt tokens accepted and not yet prefilled: the scheduler's (Scheduler::prefill_tokens_pending)
  // plus the prompts of requests not admitted to it yet (what a router balances prefill servers by).
  int64_t prefill_tokens_pending = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  int32_t kv_blocks_lent = 0;  // lent to outside writers (reserve_kv_blocks), held ones included
  double kv_usage = 0.0;       // 1 - free / total
  int64_t prefix_queries_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prompt_tokens_total = 0;        // of finished requests
  int64_t generation_tokens_total = 0;    // sampled tokens (stop tokens included)
  int64_t jump_forward_tokens_total = 0;  // of those, appended by jump-forward without sampling
  int64_t requests_finished = 0;
  int64_t n_steps = 0;
  int64_t n_preemptions = 0;
  // Per-step scheduling overhead: engine-thread time between one forward finishing and the next
  // one starting, summed over back-to-back steps (the model sits idle meanwhile), and the forward
  // time itself.
  int64_t step_gap_ns_total = 0;
  int64_t n_step_gaps = 0;
  int64_t forward_ns_total = 0;
  // Decode-only steps (every row a sequence's next token, no prompt rows): how many, the wall time
  // they took (the gap before each plus its forward), and the tokens they produced (one per row,
  // plus accepted drafts). decode_only_tokens / decode_only_ns is the aggregate decode rate that
  // llama-batched-bench reports as S_TG, without the prefill steps an end-to-end figure mixes in.
  int64_t decode_only_steps = 0;
  int64_t decode_only_ns_total = 0;
  int64_t decode_only_tokens_total = 0;
  // KV tiers (zeros without): sequences restored, tokens that arrived, blocks written, write jobs
  // dropped because the queue was full.
  int64_t kv_tier_restores = 0;
  int64_t kv_tier_restored_tokens = 0;
  int64_t kv_tier_blocks_written = 0;
  int64_t kv_tier_write_jobs_dropped = 0;
  int64_t kv_tier_write_jobs = 0;    // write jobs queued (prompt, every write_every_tokens, end)
  int64_t kv_tier_write_cpu_ns = 0;  // the tier writer thread's CPU on write jobs (TierStoreStats)
  // Speculative decoding (vLLM's spec_decode_* counters): decode chunks that verified drafts, draft
  // tokens verified, of which accepted, and accepted by draft position (index j: the (j+1)-th draft).
  // Mean acceptance length = 1 + accepted / drafts.
  int64_t spec_decode_num_drafts = 0;
  int64_t spec_decode_num_draft_tokens = 0;
  int64_t spec_decode_num_accepted_tokens = 0;
  std::vector<int64_t> spec_decode_num_accepted_tokens_per_pos;  // [num_speculative_tokens]
  // Time of the steps that drafted: in the drafter (propose + observe), and in the target forward
  // with the sampling and verification after it.
  int64_t spec_decode_draft_ns_total = 0;
  int64_t spec_decode_verify_ns_total = 0;
  // The adaptive policy's cost scales: observed / measured-at-start cost of the target forward and of
  // the drafter (1 until observed, or without the policy). SpeculationPolicy, docs/speculative.md.
  double spec_decode_target_cost_scale = 1.0;
  double spec_decode_draft_cost_scale = 1.0;
  // ... and its estimate of a decode step's time besides the forwards (0 until observed).
  double spec_decode_step_overhead_ns = 0;
  // Request::cache_pin: blocks pinned now, leases now, requests refused for the quota.
  int32_t kv_pinned_blocks = 0;
  int32_t kv_pin_leases = 0;
  int64_t kv_pins_refused = 0;
  int32_t kv_blocks_cached = 0;     // pool blocks registered in the prefix index
  int64_t kv_evictions = 0;         // cached pool blocks reallocated
  int32_t kv_pin_quota_blocks = 0;  // EngineConfig::max_pinned_blocks as resolved
};

}  // namespace ds
