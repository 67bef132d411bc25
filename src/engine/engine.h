// Engine: continuous batching over one ModelRunner. Callers submit requests from any thread and get
// their tokens back as events; one engine thread runs the step loop (scheduling, sampling, stop
// conditions, events) and a StepExecutor thread runs the forward passes.
//
// Step loop with async scheduling (EngineConfig::async_scheduling, on by default): while step N's
// forward runs, the engine thread plans step N+1 (admission, block tables, token copies) and emits
// step N-1's events (detokenization, stop strings). When N finishes it samples N's rows, fills the
// decode tokens of N+1 that were pending on those samples, drops the rows of sequences that N
// finished, and launches N+1 at once. With it off, every phase runs in turn (the baseline the
// benchmark compares against).
//
// Determinism: a request's draw at output position p is keyed by (seed, p), and the model's rows
// do not depend on their neighbours or the chunking, so the same request gives the same tokens
// whatever else runs and however its prompt was split (tests: engine_invariance_test).
//
// Thread safety: submit(), cancel(), stats() and shutdown() may be called from any thread. Event
// sinks run on the engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/cache_scopes.h"
#include "engine/engine_config.h"
#include "engine/outside_kv_blocks.h"
#include "engine/pin_leases.h"
#include "engine/request.h"
#include "engine/request_output.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "engine/sequence_slots.h"
#include "engine/speculation_policy.h"
#include "engine/step_batch.h"
#include "engine/step_executor.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/tier_store.h"
#include "model/model_runner.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ds {

class Engine {
 public:
  // Sizes and initialises the model's KV cache, then starts the threads. invalid_argument for a
  // config the model cannot run (block size, no room for one block, ...). `tokenizer` may be null
  // (then requests must not detokenize or use stop strings); it and `model` must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config, ModelRunner& model,
                                                const Tokenizer* tokenizer);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its events go to `sink` (on the engine thread). Errors, with nothing queued:
  // engine_bad_request (user: empty prompt, token id out of range, bad sampling params, too long
  // for max_seq_len, stop strings without a tokenizer), engine_overloaded (retryable: the waiting
  // queue is full), engine_shutting_down.
  Result<RequestId> submit(Request request, EventSink sink);

  // Ends a request: its final event (finish_reason cancelled) follows shortly and its KV blocks are
  // freed in the next step. Unknown or finished ids are ignored.
  void cancel(RequestId id);

  // Compiles an output constraint against this engine's tokenizer (thread-safe; compiled grammars
  // are cached by their source). Put the result in Request::grammar. engine_bad_request without a
  // tokenizer; otherwise the grammar compilers' errors (docs/grammar.md).
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compile_grammar(const grammar::GrammarSpec& spec);

  // Pool blocks written from outside the engine (P/D: a prefill server puts a prompt's KV pages
  // straight into them, docs/pd.md; engine/outside_kv_blocks.h). Any thread; reserve and adopt wait
  // for the engine thread (at most one step), release does not. reserve_kv_blocks: n fresh blocks,
  // pinned, whose pages (kv_page_arrays) the caller may write until it releases them
  // (kvcache_out_of_blocks when fewer are free). adopt_kv_blocks: they now hold blocks
  // [first_block, first_block + blocks.size()) of `tokens` under `cache_salt`: registered in the
  // prefix cache, so a request with that prompt hits them (returns how many were registered).
  // release_kv_blocks: the pins go, now or not before `not_before` (a writer that may still be
  // putting). engine_shutting_down once the engine stopped.
  // max_lent caps the blocks lent out at once (held ones included): beyond it, kvcache_out_of_blocks.
  Result<std::vector<BlockId>> reserve_kv_blocks(int32_t n,
                                                 int32_t max_lent = std::numeric_limits<int32_t>::max());
  Result<int32_t> adopt_kv_blocks(std::vector<BlockId> blocks, std::vector<int32_t> tokens,
                                  std::string cache_salt, int64_t first_block);
  void release_kv_blocks(std::vector<BlockId> blocks, std::optional<SteadyTime> not_before = std::nullopt);
  // The model's paged KV storage (ModelRunner::kv_page_arrays), fixed for the engine's lifetime.
  std::vector<KvPageArray> kv_page_arrays() const { return model_.kv_page_arrays(); }

  EngineStats stats() const;
  // Drops the cached pool prefixes that `filter` matches (admin deletion; docs/kvcache.md): matching
  // pin leases end first, blocks in use are kept and counted. Any thread; waits for the engine thread
  // (engine_shutting_down when it stopped).
  Result<CacheClearResult> clear_cache(const CacheClearFilter& filter);
  // Each KV tier's name and counters (empty without tiers); any thread.
  std::vector<std::pair<std::string, TierStats>> kv_tier_stats() const;
  const EngineConfig& config() const { return config_; }
  const KvCacheConfig& kv_cache_config() const { return kv_config_; }
  // Stops taking work, ends every open request (error engine_shutting_down) and joins the threads.
  // Idempotent.
  void shutdown();

 private:
  struct Submission {
    RequestId id;
    Request request;
    EventSink sink;
    SteadyTime queued_at;
  };
  struct ActiveRequest {
    Request request;
    EventSink sink;
    RequestOutput output;
    PenaltyState penalties;
    std::unique_ptr<grammar::GrammarMatcher> matcher;  // request.grammar's state; null without one
    bool grammar_active = false;                       // past grammar_after_token (or from the start)
    bool in_scheduler = false;                         // Scheduler::finish still owed
    bool in_flight = false;                            // a row in the step being computed
    bool prompt_committed = false;  // the first token was sampled: the whole prompt is committed
    bool prompt_tiered = false;     // the prompt's blocks were handed to the KV tier writer
    int64_t n_blocks_tiered = 0;    // blocks [0, n) of its table were handed to the writer
    ActiveRequest(RequestId id, Request req, EventSink s, const Tokenizer* tok, std::span<const int32_t> eos);
  };

  Engine(const EngineConfig& config, ModelRunner& model, const Tokenizer* tokenizer,
         const KvCacheConfig& kv_config, std::vector<std::shared_ptr<KvTier>> tiers);
  Status validate(const Request& request) const;

  // Engine thread.
  void loop();
  // Moves the inbox into the engine; blocks when idle. false once shutdown was requested.
  bool take_inbox(bool idle);
  // Runs `task` on the engine thread at its next inbox pass; false once shutdown was requested.
  bool post(std::function<void()> task);
  void admit(Submission&& s);
  void try_add_to_scheduler(RequestId id, ActiveRequest& r);
  void retry_unadmitted();
  void apply_cancel(RequestId id);
  Status plan_step(StepBatch& batch);
  // Starts the forward (async) or runs it and completes the step (sync).
  Status launch(StepBatch& batch);
  Status wait_and_complete(StepBatch& batch);
  // Reports the step's samples to the scheduler and applies the cheap stop checks (add_token).
  Status complete_forward(StepBatch& batch, const Status& forward_status, int64_t done_ns);
  // Feeds a sampled token to the request's grammar (activating it after grammar_after_token). false:
  // the token is not allowed (the request is finished with an error).
  bool advance_grammar(ActiveRequest& r, int32_t token_id);
  // Jump-forward (EngineConfig::jump_forward): appends the tokens the grammar forces after the last
  // sample to the output, the matcher and the scheduler's sequence.
  void jump_forward(SeqId seq, ActiveRequest& r);
  // Speculative decoding: whether a request may draft (all but grammar requests under jump-forward).
  bool speculates(const Request& r) const;
  // What the step samples for request r, chunk chunk_idx of the batch.
  StepBatch::SampleJob sample_job(size_t chunk_idx, ActiveRequest& r, bool speculate) const;
  // The MTP head's draft vocabulary for SpeculativeConfig::draft_vocab = n (empty: the full head).
  std::vector<int32_t> mtp_draft_vocab(int32_t n) const;
  void count_drafts(const StepBatch& batch);
  // EngineStats::decode_only_*: a decode-only step that ended at done_ns.
  void count_decode_only(const StepBatch& batch, int64_t done_ns);
  void emit_events();
  void release_finished();
  void fail_all(const Status& error);
  void publish_stats();
  // KV tiers: completions (unpin written blocks, hand restored ones to the scheduler), restores
  // of the plan, and the write path of one request's committed blocks.
  void collect_tier_completions();
  void start_restores(const StepPlan& plan);
  void write_to_tiers(RequestId id, ActiveRequest& r);
  void write_long_output(RequestId id, ActiveRequest& r);
  // The pool's index changes: scopes for clear_cache(), then the KV event sink.
  // outside_salt: the cache salt of blocks stored by no request (adopt_kv_blocks).
  void drain_kv_events(std::optional<std::string> outside_salt = std::nullopt);
  CacheClearResult apply_clear(const CacheClearFilter& filter);
  Result<int64_t> clear_tiers(const CacheClearFilter& filter);
  // The first token was sampled: tier writes and Request::cache_pin's lease.
  void on_prompt_committed(RequestId id, ActiveRequest& r);
  // Request::export_state: the model's sequence state after the prompt, into the request's output
  // (an error ends the request).
  void export_state(RequestId id, ActiveRequest& r);
  // Unix seconds of tier expiries and pin leases (the injected clock in tests).
  int64_t now_unix_s() const;
  // Request::cache_ttl_s, else the TTL of its traffic class.
  int64_t cache_ttl_s(const Request& request) const;

  EngineConfig config_;
  ModelRunner& model_;
  const Tokenizer* tokenizer_;
  // Built on first use (the vocabulary trie costs a pass over the vocabulary); guarded by grammar_mu_.
  std::mutex grammar_mu_;
  // One compiler per list of marker tokens the grammars write (GrammarSpec::marker_tokens; "" = none,
  // the common case; "｜DSML｜" for strict tool calls): each has its own vocabulary trie.
  std::map<std::string, std::unique_ptr<grammar::GrammarCompiler>> grammar_compilers_;
  KvCacheConfig kv_config_;
  std::vector<int32_t> eos_ids_;
  size_t sample_vocab_ = 0;  // logits columns that can be sampled (model vocab ∩ tokenizer vocab)

  // Engine thread only.
  KvCacheManager kv_;
  Scheduler scheduler_;
  Sampler sampler_;  // used by the thread running the step (the executor under async scheduling)
  std::optional<SequenceSlots> state_slots_;  // models with per-sequence state (V4) only
  std::unordered_map<RequestId, std::unique_ptr<ActiveRequest>> active_;
  PinLeases pin_leases_;
  OutsideKvBlocks outside_blocks_;
  CacheScopes cache_scopes_;
  std::vector<RequestId> unadmitted_;           // accepted, waiting for room in the scheduler's queue
  std::vector<RequestId> touched_;              // requests with something to report this iteration
  std::vector<RequestId> finishing_;            // finished: scheduler release and removal pending
  std::vector<int32_t> sampled_;                // [n_chunks] of the step being completed
  std::vector<std::vector<int32_t>> accepted_;  // [n_chunks] accepted draft tokens of that step
  std::shared_ptr<Drafter> drafter_;            // speculative decoding; null when off
  int64_t last_done_ns_ = 0;                    // when the previous forward finished (0: none pending a gap)

  // Speculative decoding: drafts per step (speculative.adaptive), and the sequences the drafter
  // forgets when the next step runs (StepBatch::forget).
  std::optional<SpeculationPolicy> spec_policy_;
  std::vector<SeqId> drafter_forgets_;
  EngineStats local_stats_;

  // Inbox, guarded by inbox_mu_.
  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<Submission> inbox_;
  std::vector<RequestId> cancels_;
  std::vector<std::pair<CacheClearFilter, std::promise<CacheClearResult>>> clears_;
  std::vector<std::function<void()>> tasks_;  // run on the engine thread (outside KV blocks)
  bool stop_requested_ = false;
  int32_t n_scheduler_waiting_ = 0;  // last value published by the engine thread

  std::atomic<RequestId> next_id_{1};
  mutable std::mutex stats_mu_;
  EngineStats stats_;  // guarded by stats_mu_

  // KV tiers (null without); its threads only copy blocks through the model (tier_store.h).
  std::unique_ptr<TierStore> tiers_;
  std::vector<std::shared_ptr<KvTier>> tier_list_;  // the same tiers, for kv_tier_stats(); never reset
  int32_t n_tier_writes_pending_ = 0;               // write jobs whose blocks are pinned (engine thread)

  std::mutex shutdown_mu_;
  // Last: started after everything above is ready; joined by shutdown().
  std::unique_ptr<StepExecutor> executor_;
  std::thread thread_;
};

}  // namespace ds
