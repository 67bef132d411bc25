#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "base/clock.h"
#include "engine/dspark_drafter.h"
#include "engine/mtp_drafter.h"
#include "engine/speculation_costs.h"
#include "grammar/jump_forward.h"
#include "kvcache/kv_tier.h"
#include "kvcache/tier_key.h"

namespace ds {

namespace {

Status bad_request(const std::string& message) { return Status(ErrorCode::engine_bad_request, message); }

// Sleep while only waiting-but-unschedulable work exists (no free blocks): deadlines still expire.
constexpr auto kBlockedPoll = std::chrono::milliseconds(1);

// The speculation cost curves on this model and host (speculation_costs.h), over as many sequences
// as the engine runs at once (at most 64); an error when a block cannot hold a verify chunk.
Result<SpeculationCosts> measure_costs(ModelRunner& model, const EngineConfig& config,
                                       const KvCacheConfig& kv, bool draft_head) {
  const int32_t k = config.speculative.num_speculative_tokens;
  if (kv.block_size_tokens <= k) return Status(ErrorCode::invalid_argument, "blocks too small");
  const int32_t max_seqs = std::min({config.scheduler.max_running, kv.n_blocks, int32_t{64}});
  return measure_speculation_costs(model, max_seqs, k, draft_head);
}

}  // namespace

Engine::ActiveRequest::ActiveRequest(RequestId id, Request req, EventSink s, const Tokenizer* tok,
                                     std::span<const int32_t> eos)
    : request(std::move(req)), sink(std::move(s)), output(id, request, tok, eos) {
  if (request.grammar) {
    matcher = std::make_unique<grammar::GrammarMatcher>(request.grammar);
    grammar_active = request.grammar_after_token < 0;
  }
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config, ModelRunner& model,
                                               const Tokenizer* tokenizer) {
  const KvCacheLayout layout = model.kv_cache_layout();
  const int32_t bs =
      config.block_size_tokens == 0 ? default_block_size_tokens(layout) : config.block_size_tokens;
  if (bs <= 0 || layout.block_size_multiple <= 0 || bs % layout.block_size_multiple != 0) {
    return Status(ErrorCode::invalid_argument, "block_size_tokens " + std::to_string(bs) +
                                                   " must be a positive multiple of " +
                                                   std::to_string(layout.block_size_multiple));
  }
  const SchedulerConfig& sc = config.scheduler;
  if (sc.max_step_tokens < 1 || sc.max_running < 1 || sc.max_waiting < 1) {
    return Status(ErrorCode::invalid_argument, "max_step_tokens, max_running and max_waiting must be >= 1");
  }
  int64_t n_blocks = config.n_kv_blocks;
  if (n_blocks == 0) {
    const int64_t block_bytes = layout.bytes_per_token * bs;
    if (block_bytes <= 0)
      return Status(ErrorCode::invalid_argument, "the model reports no KV bytes per token");
    n_blocks = std::min<int64_t>(config.kv_cache_bytes / block_bytes, INT32_MAX);
  }
  if (n_blocks < 1) {
    return Status(ErrorCode::invalid_argument, "the KV cache holds no block: kv_cache_bytes " +
                                                   std::to_string(config.kv_cache_bytes) +
                                                   " < one block of " + std::to_string(bs) + " tokens");
  }
  // Models with unpaged per-sequence state (V4's window rings and compressor groups) get one state
  // slot per running sequence (+1 spare) and resume a prefix hit by SWA bounded replay of the
  // model's replay length (scheduler.h); a model with such state but no replay gets no prefix
  // caching. Without speculative decoding the engine does not run the MTP layer, so the model keeps no state
  // for it.
  EngineConfig engine_config = config;
  KvCacheConfig kv_config{bs, static_cast<int32_t>(n_blocks)};
  kv_config.mtp_layer = false;
  kv_config.memory = config.kv_memory;
  if (layout.bytes_per_sequence > 0) {
    kv_config.n_sequence_slots = sc.max_running + 1;
    engine_config.scheduler.swa_replay_tokens = layout.swa_replay_tokens;
    if (layout.swa_replay_tokens == 0) engine_config.enable_prefix_caching = false;
  }
  if (config.drafter && !config.speculative.enabled())
    return Status(ErrorCode::invalid_argument, "a drafter needs speculative.num_speculative_tokens >= 1");
  if (config.speculative.enabled()) {
    const bool dspark = config.speculative.method == SpeculativeMethod::dspark;
    if (!config.drafter && !dspark && !model.supports_mtp_drafting()) {
      return Status(ErrorCode::invalid_argument,
                    "speculative method mtp needs a DeepSeek-V3 or V4 checkpoint with an MTP layer "
                    "(num_nextn_predict_layers >= 1); this model cannot draft");
    }
    if (!config.drafter && dspark) {
      if (model.draft_block_model() == nullptr || !model.supports_truncation()) {
        return Status(ErrorCode::invalid_argument,
                      "speculative method dspark needs a DeepSeek-V4.1 checkpoint with DSpark stages "
                      "(dspark_* keys, num_nextn_predict_layers >= 1); this model has none");
      }
      if (config.speculative.num_speculative_tokens > model.draft_block_model()->block_size()) {
        return Status(ErrorCode::invalid_argument,
                      "speculative method dspark drafts at most dspark_block_size (" +
                          std::to_string(model.draft_block_model()->block_size()) +
                          ") tokens a step; num_speculative_tokens is " +
                          std::to_string(config.speculative.num_speculative_tokens));
      }
    }
    // Async scheduling stays: a sequence with drafts in flight is planned again only after its
    // verify step (the scheduler skips it meanwhile), the others overlap as usual.
    engine_config.scheduler.num_speculative_tokens = config.speculative.num_speculative_tokens;
    kv_config.mtp_layer = true;
  }
  if (config.jump_forward) engine_config.async_scheduling = false;  // forced tokens precede the next plan
  DS_TRY(model.init_kv_cache(kv_config));
  std::vector<std::shared_ptr<KvTier>> tiers;
  if (config.kv_tiers.open && engine_config.enable_prefix_caching) {
    if (model.kv_block_bytes() <= 0) {
      return Status(ErrorCode::invalid_argument, "KV tiers need a model that exports KV blocks");
    }
    const uint64_t namespace_id = tier_namespace({.model_fingerprint = config.kv_tiers.model_fingerprint,
                                                  .kv_layout = model.kv_layout_tag(),
                                                  .block_size_tokens = bs,
                                                  .block_bytes = model.kv_block_bytes()});
    engine_config.prefix_hash_seed = tier_prefix_seed(config.kv_tiers.secret, namespace_id);
    DS_ASSIGN_OR_RETURN(tiers, config.kv_tiers.open(namespace_id));
  }
  return std::unique_ptr<Engine>(new Engine(engine_config, model, tokenizer, kv_config, std::move(tiers)));
}

Engine::Engine(const EngineConfig& config, ModelRunner& model, const Tokenizer* tokenizer,
               const KvCacheConfig& kv_config, std::vector<std::shared_ptr<KvTier>> tiers)
    : config_(config),
      model_(model),
      tokenizer_(tokenizer),
      kv_config_(kv_config),
      kv_(KvCacheManagerConfig{.block_size_tokens = kv_config.block_size_tokens,
                               .n_blocks = kv_config.n_blocks,
                               .process_seed = config.prefix_hash_seed,
                               .enable_prefix_caching = config.enable_prefix_caching,
                               .compression_ratios = {},
                               .record_events = true}),
      scheduler_(
          [&] {
            // The longest sequence: the configured limit, else the model's, never more than the cache.
            SchedulerConfig sc = config.scheduler;
            if (sc.max_seq_len <= 0) sc.max_seq_len = model.config().max_position_embeddings;
            if (sc.max_seq_len <= 0) sc.max_seq_len = 4096;
            sc.max_seq_len = std::min<int64_t>(
                sc.max_seq_len, static_cast<int64_t>(kv_config.n_blocks) * kv_config.block_size_tokens);
            config_.scheduler = sc;
            return sc;
          }(),
          kv_),
      pin_leases_(config.max_pinned_blocks >= 0 ? config.max_pinned_blocks : kv_config.n_blocks / 4) {
  if (kv_config.n_sequence_slots > 0) state_slots_.emplace(kv_config.n_sequence_slots);
  const ModelConfig& mc = model.config();
  if (mc.eos_token_id >= 0) eos_ids_.push_back(mc.eos_token_id);
  if (tokenizer != nullptr && tokenizer->eos_id() >= 0) eos_ids_.push_back(tokenizer->eos_id());
  eos_ids_.insert(eos_ids_.end(), config.extra_eos_token_ids.begin(), config.extra_eos_token_ids.end());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  // The checkpoint's rows past the tokenizer's last id are padding without text: never sampled.
  sample_vocab_ = static_cast<size_t>(mc.vocab_size);
  if (tokenizer != nullptr)
    sample_vocab_ = std::min(sample_vocab_, static_cast<size_t>(tokenizer->vocab_size()));
  if (config_.speculative.enabled()) {
    bool draft_head = false;  // the MTP drafter uses a draft vocabulary head
    const bool dspark = config_.speculative.method == SpeculativeMethod::dspark;
    if (config_.drafter) {
      drafter_ = config_.drafter;
    } else if (dspark) {
      auto d = std::make_shared<DsparkDrafter>(model_, sample_vocab_);
      if (config_.speculative.confidence_scheduling) {
        // The target's step time by rows, as the verify steps run it (every row's logits and
        // DSpark features), measured once here: the SPS(B) curve of the paper's Algorithm 1.
        Result<SpeculationCosts> costs = measure_costs(model_, config_, kv_config, false);
        if (costs.ok()) d->set_schedule(std::move(costs->target), config_.speculative.confidence_delayed);
      }
      drafter_ = std::move(d);
    } else {
      std::vector<int32_t> draft_vocab = mtp_draft_vocab(config_.speculative.draft_vocab);
      if (!model_.set_mtp_draft_vocab(draft_vocab).ok()) draft_vocab.clear();  // full head
      if (draft_vocab.empty()) (void)model_.set_mtp_draft_vocab({});
      draft_head = !draft_vocab.empty();
      drafter_ = std::make_shared<MtpDrafter>(model_, sample_vocab_, std::move(draft_vocab));
    }
    local_stats_.spec_decode_num_accepted_tokens_per_pos.assign(
        static_cast<size_t>(config_.speculative.num_speculative_tokens), 0);
    if (config_.speculative.adaptive) {
      spec_policy_.emplace(config_.speculative.num_speculative_tokens);
      // The cost curve of the target and the MTP layer on this model and host. An injected
      // drafter's cost is unknown: without costs the policy always drafts k.
      if (!config_.drafter && !dspark) {
        Result<SpeculationCosts> costs = measure_costs(model_, config_, kv_config, draft_head);
        if (costs.ok()) spec_policy_->set_costs(std::move(costs->target), std::move(costs->draft));
      }
    }
  }
  local_stats_.kv_blocks_total = kv_config.n_blocks;
  local_stats_.kv_blocks_free = kv_config.n_blocks;
  local_stats_.kv_pin_quota_blocks = pin_leases_.max_blocks();
  stats_ = local_stats_;
  if (config_.async_scheduling) executor_ = std::make_unique<StepExecutor>();
  tier_list_ = tiers;
  if (!tiers.empty()) {
    TierBlockIo io;
    io.block_bytes = model.kv_block_bytes();
    io.export_block = [this](int32_t block_id, std::span<std::byte> out) {
      return model_.export_kv_block(block_id, out);
    };
    io.import_block = [this](int32_t block_id, std::span<const std::byte> in) {
      return model_.import_kv_block(block_id, in);
    };
    tiers_ = std::make_unique<TierStore>(std::move(tiers), std::move(io), config_.kv_tiers.max_queued_writes);
    scheduler_.set_tier_lookup([this](std::span<const uint64_t> keys) { return tiers_->count_prefix(keys); });
  }
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  std::lock_guard<std::mutex> guard(shutdown_mu_);
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stop_requested_ = true;
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  executor_.reset();
  {
    // Tasks the loop never ran: their waiters get engine_shutting_down (broken promises).
    std::vector<std::function<void()>> never_run;
    std::lock_guard<std::mutex> lock(inbox_mu_);
    never_run.swap(tasks_);
  }
  // After the loop nothing submits any more; queued writes still reach the tiers, so a server
  // stopped cleanly leaves its prefixes for the next one.
  if (tiers_) {
    tiers_->drain();
    publish_stats();  // the final tier counters stay readable through stats()
  }
  tiers_.reset();
}

Status Engine::validate(const Request& r) const {
  if (r.prompt_tokens.empty()) return bad_request("prompt_tokens is empty");
  const int32_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
    const int32_t t = r.prompt_tokens[i];
    if (t < 0 || t >= vocab) {
      return bad_request("prompt_tokens[" + std::to_string(i) + "] = " + std::to_string(t) +
                         " is outside [0, " + std::to_string(vocab) + ")");
    }
    if (t == model_.config().image_token_id) {  // V4.1: images need the vision encoder (not implemented)
      return bad_request("prompt_tokens[" + std::to_string(i) + "] = " + std::to_string(t) +
                         " is the image placeholder (image_token_id): image inputs are not supported");
    }
  }
  if (Status st = r.sampling.validate(sample_vocab_); !st.ok()) return bad_request(st.message());
  if (r.stop.max_tokens < 1)
    return bad_request("max_tokens must be >= 1, got " + std::to_string(r.stop.max_tokens));
  const int64_t total = static_cast<int64_t>(r.prompt_tokens.size()) + r.stop.max_tokens;
  if (total > config_.scheduler.max_seq_len) {
    return bad_request("prompt (" + std::to_string(r.prompt_tokens.size()) + " tokens) + max_tokens (" +
                       std::to_string(r.stop.max_tokens) + ") exceeds the maximum sequence length " +
                       std::to_string(config_.scheduler.max_seq_len));
  }
  if (Status st = RequestOutput::validate_stop_strings(r.stop); !st.ok()) return bad_request(st.message());
  if (r.grammar && r.grammar->vocab().vocab_size() < sample_vocab_) {
    return bad_request("the grammar was compiled for a vocabulary of " +
                       std::to_string(r.grammar->vocab().vocab_size()) + " tokens, the model samples from " +
                       std::to_string(sample_vocab_));
  }
  if (r.grammar_after_token >= static_cast<int32_t>(sample_vocab_))
    return bad_request("grammar_after_token " + std::to_string(r.grammar_after_token) + " is not a token id");
  if (r.cache_ttl_s.has_value() && *r.cache_ttl_s < 1)
    return bad_request("cache_ttl_s must be >= 1, got " + std::to_string(*r.cache_ttl_s));
  if (!r.stop.stop_strings.empty() && (tokenizer_ == nullptr || !r.detokenize)) {
    return bad_request("stop strings need detokenized output (a tokenizer and detokenize = true)");
  }
  // The state is taken when the first token is sampled; a later step would already move it on.
  if (r.export_state && r.stop.max_tokens != 1) return bad_request("export_state needs max_tokens 1");
  if (r.state_import) {
    if (!r.state_import->bytes || r.state_import->n_tokens < 0)
      return bad_request("state_import needs its bytes and a position >= 0");
    // Checked here, not in the step: bytes this model cannot take are this request's error only.
    if (Status st = model_.check_sequence_state(*r.state_import->bytes, r.state_import->n_tokens); !st.ok())
      return bad_request("state_import: " + st.message());
  }
  return ok_status();
}

Result<RequestId> Engine::submit(Request request, EventSink sink) {
  DS_TRY(validate(request));
  RequestId id = 0;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (stop_requested_) return Status(ErrorCode::engine_shutting_down, "the engine is shutting down");
    const int64_t queued = static_cast<int64_t>(inbox_.size()) + n_scheduler_waiting_;
    if (queued >= config_.scheduler.max_waiting) {
      return Status(ErrorCode::engine_overloaded, std::to_string(queued) +
                                                      " requests are waiting (max_waiting " +
                                                      std::to_string(config_.scheduler.max_waiting) + ")");
    }
    id = next_id_.fetch_add(1);
    inbox_.push_back(Submission{id, std::move(request), std::move(sink), std::chrono::steady_clock::now()});
  }
  inbox_cv_.notify_all();
  return id;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    cancels_.push_back(id);
  }
  inbox_cv_.notify_all();
}

bool Engine::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (stop_requested_) return false;
    tasks_.push_back(std::move(task));
  }
  inbox_cv_.notify_all();
  return true;
}

namespace {

// Runs `work` on the engine thread through `post` and waits for its result.
template <typename T, typename Post, typename Work>
Result<T> on_engine_thread(Post&& post, Work work) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  std::future<Result<T>> done = promise->get_future();
  if (!post([promise, work = std::move(work)]() mutable { promise->set_value(work()); }))
    return Status(ErrorCode::engine_shutting_down, "the engine is shutting down");
  try {
    return done.get();
  } catch (const std::future_error&) {  // the engine stopped before it got to it
    return Status(ErrorCode::engine_shutting_down, "the engine shut down first");
  }
}

}  // namespace

Result<std::vector<BlockId>> Engine::reserve_kv_blocks(int32_t n, int32_t max_lent) {
  return on_engine_thread<std::vector<BlockId>>(
      [this](auto task) { return post(std::move(task)); },
      [this, n, max_lent] { return outside_blocks_.reserve(kv_, n, max_lent); });
}

Result<int32_t> Engine::adopt_kv_blocks(std::vector<BlockId> blocks, std::vector<int32_t> tokens,
                                        std::string cache_salt, int64_t first_block) {
  return on_engine_thread<int32_t>(
      [this](auto task) { return post(std::move(task)); },
      [this, blocks = std::move(blocks), tokens = std::move(tokens), salt = std::move(cache_salt),
       first_block] {
        drain_kv_events();  // the steps' events first: the adoption's are the only ones with no request
        Result<int32_t> n = outside_blocks_.adopt(kv_, blocks, tokens, salt, first_block);
        drain_kv_events(salt);
        return n;
      });
}

void Engine::release_kv_blocks(std::vector<BlockId> blocks, std::optional<SteadyTime> not_before) {
  (void)post(
      [this, blocks = std::move(blocks), not_before] { outside_blocks_.release(kv_, blocks, not_before); });
}

Result<CacheClearResult> Engine::clear_cache(const CacheClearFilter& filter) {
  std::future<CacheClearResult> done;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    if (stop_requested_) return Status(ErrorCode::engine_shutting_down, "the engine is shutting down");
    std::promise<CacheClearResult> promise;
    done = promise.get_future();
    clears_.emplace_back(filter, std::move(promise));
  }
  inbox_cv_.notify_all();
  CacheClearResult result;
  try {
    result = done.get();
  } catch (const std::future_error&) {  // the engine stopped before it got to it
    return Status(ErrorCode::engine_shutting_down, "the engine shut down before clearing the cache");
  }
  DS_ASSIGN_OR_RETURN(result.tier_entries_removed, clear_tiers(filter));
  return result;
}

// On the caller's thread (a scan of a remote tier must not stall steps): first the writes already
// queued land, so none of the matching blocks is written after the scan; then every tier removes
// the matching entries, whoever wrote them.
Result<int64_t> Engine::clear_tiers(const CacheClearFilter& filter) {
  if (tier_list_.empty()) return int64_t{0};
  if (tiers_ != nullptr) tiers_->drain();
  TierScopeFilter tier_filter;
  if (filter.salt.has_value()) tier_filter.salt_tag = tier_salt_tag(*filter.salt);
  tier_filter.key_prefix = filter.key_prefix;
  int64_t n_removed = 0;
  for (const auto& tier : tier_list_) {
    Result<int64_t> n = tier->remove_matching(tier_filter);
    if (!n.ok())
      return Status(n.status().code(), fmt::format("the pool was cleared, but the {} tier was not: {}",
                                                   tier->name(), n.status().message()));
    n_removed += *n;
  }
  return n_removed;
}

CacheClearResult Engine::apply_clear(const CacheClearFilter& filter) {
  drain_kv_events();  // the scopes must know every block committed so far
  CacheClearResult result;
  result.pin_leases_released = pin_leases_.release_matching(
      kv_, [&](const std::string& salt, const std::string& key) { return filter.matches(salt, key); });
  const bool everything = !filter.salt.has_value() && !filter.key_prefix.has_value();
  if (everything) {
    result.blocks_removed = kv_.forget_all(&result.blocks_in_use);
  } else {
    const std::vector<uint64_t> hashes = cache_scopes_.matching(filter);
    result.blocks_removed = kv_.forget(hashes, &result.blocks_in_use);
  }
  drain_kv_events();
  return result;
}

void Engine::drain_kv_events(std::optional<std::string> outside_salt) {
  std::vector<KvCacheEvent> events = kv_.take_events();
  if (events.empty()) return;
  // Blocks stored by no request (seq 0, adopted outside blocks) belong to outside_salt's prefix.
  const auto salt_of = [&](SeqId seq) -> const std::string* {
    auto it = active_.find(seq);
    if (it != active_.end()) return &it->second->request.cache_salt;
    return seq == 0 && outside_salt ? &*outside_salt : nullptr;
  };
  cache_scopes_.on_events(events, [&](SeqId seq) -> std::optional<std::pair<std::string, std::string>> {
    const std::string* salt = salt_of(seq);
    if (salt == nullptr) return std::nullopt;
    auto it = active_.find(seq);
    return std::pair<std::string, std::string>{*salt,
                                               it != active_.end() ? it->second->request.cache_key : ""};
  });
  for (KvCacheEvent& ev : events) {  // the salt tag a router needs to keep tenants apart
    if (ev.kind != KvCacheEvent::Kind::stored) continue;
    const std::string* salt = salt_of(ev.seq_id);
    if (salt != nullptr && !salt->empty()) ev.salt_tag = tier_salt_tag(*salt);
  }
  if (config_.kv_event_sink) config_.kv_event_sink(std::move(events));
}

std::vector<std::pair<std::string, TierStats>> Engine::kv_tier_stats() const {
  std::vector<std::pair<std::string, TierStats>> out;
  for (const auto& tier : tier_list_) out.emplace_back(tier->name(), tier->stats());
  return out;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

bool Engine::take_inbox(bool idle) {
  std::vector<Submission> submissions;
  std::vector<RequestId> cancels;
  std::vector<std::pair<CacheClearFilter, std::promise<CacheClearResult>>> clears;
  std::vector<std::function<void()>> tasks;
  {
    std::unique_lock<std::mutex> lock(inbox_mu_);
    const auto has_input = [this] {
      return stop_requested_ || !inbox_.empty() || !cancels_.empty() || !clears_.empty() || !tasks_.empty();
    };
    if (idle && !has_input()) {
      // Restores and tier writes in flight complete on other threads: poll for them too.
      const bool blocked = scheduler_.n_waiting() > 0 || scheduler_.n_running() > 0 || !unadmitted_.empty() ||
                           scheduler_.n_restoring() > 0 || n_tier_writes_pending_ > 0;
      const std::optional<SteadyTime> held_until = outside_blocks_.next_expiry();
      if (blocked) {
        inbox_cv_.wait_for(lock, kBlockedPoll, has_input);
      } else if (held_until) {
        inbox_cv_.wait_until(lock, *held_until, has_input);
      } else {
        inbox_cv_.wait(lock, has_input);
      }
      last_done_ns_ = 0;  // the model was idle for lack of work, not for scheduling overhead
    }
    if (stop_requested_) return false;
    submissions.swap(inbox_);
    cancels.swap(cancels_);
    clears.swap(clears_);
    tasks.swap(tasks_);
    // They leave the inbox for the scheduler's queue: keep submit()'s count right until the next
    // publish_stats().
    n_scheduler_waiting_ += static_cast<int32_t>(submissions.size());
  }
  retry_unadmitted();
  for (Submission& s : submissions) admit(std::move(s));
  for (RequestId id : cancels) apply_cancel(id);
  for (auto& [filter, promise] : clears) promise.set_value(apply_clear(filter));
  for (std::function<void()>& task : tasks) task();
  outside_blocks_.expire(kv_, std::chrono::steady_clock::now());
  return true;
}

void Engine::admit(Submission&& s) {
  auto record =
      std::make_unique<ActiveRequest>(s.id, std::move(s.request), std::move(s.sink), tokenizer_, eos_ids_);
  ActiveRequest& r = *record;
  r.output.queued_at = s.queued_at;
  if (r.request.sampling.has_penalties()) r.penalties.add_prompt_tokens(r.request.prompt_tokens);
  active_.emplace(s.id, std::move(record));
  try_add_to_scheduler(s.id, r);
}

void Engine::try_add_to_scheduler(RequestId id, ActiveRequest& r) {
  SeqSpec spec;
  spec.prompt_tokens = r.request.prompt_tokens;
  spec.max_tokens = r.request.stop.max_tokens;
  spec.priority = r.request.priority;
  spec.deadline = r.request.deadline;
  spec.cache_salt = r.request.cache_salt;
  spec.tenant = r.request.tenant;
  spec.speculate = drafter_ != nullptr && speculates(r.request);
  // A model that keeps no unpaged state (V3) exports none: its blocks are the whole state.
  if (r.request.state_import && r.request.state_import->bytes && !r.request.state_import->bytes->empty())
    spec.state_import_at = r.request.state_import->n_tokens;
  const Status st = scheduler_.add(id, std::move(spec));
  if (st.ok()) {
    r.in_scheduler = true;
  } else if (st.code() == ErrorCode::engine_overloaded) {
    // submit() accepted it against a count that preempted sequences can push over the queue's
    // bound: an accepted request is never refused later, it waits here for room instead.
    unadmitted_.push_back(id);
  } else {
    r.output.finish(FinishReason::error, st);
    touched_.push_back(id);
  }
}

std::vector<int32_t> Engine::mtp_draft_vocab(int32_t n) const {
  // The n lowest ids (a BPE vocabulary's merge order, roughly its frequency rank), and the special
  // tokens wherever they are (EOS ends every reply).
  const int32_t vocab = static_cast<int32_t>(sample_vocab_);
  if (n < 0) n = std::max(1024, vocab / 4);
  if (n == 0 || n >= vocab) return {};
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < vocab; ++t) {
    const bool special = tokenizer_ != nullptr && tokenizer_->is_special(t);
    if (t < n || special || std::binary_search(eos_ids_.begin(), eos_ids_.end(), t)) ids.push_back(t);
  }
  return ids;
}

bool Engine::speculates(const Request& r) const {
  // Grammar and penalised requests draft too (StepBatch::verify masks and penalises each row as a
  // run without drafts would). Jump-forward appends forced tokens between steps, which a drafting
  // sequence's pending verify cannot take: its grammar requests decode one token per step.
  return !(r.grammar && config_.jump_forward);
}

void Engine::retry_unadmitted() {
  std::vector<RequestId> pending;
  pending.swap(unadmitted_);
  const SteadyTime now = std::chrono::steady_clock::now();
  for (RequestId id : pending) {
    auto it = active_.find(id);
    if (it == active_.end() || it->second->output.finished()) continue;  // cancelled meanwhile
    ActiveRequest& r = *it->second;
    if (r.request.deadline && *r.request.deadline <= now) {
      r.output.finish(FinishReason::deadline,
                      Status(ErrorCode::engine_deadline_exceeded, "the request's deadline passed"));
      touched_.push_back(id);
      continue;
    }
    try_add_to_scheduler(id, r);
  }
}

void Engine::apply_cancel(RequestId id) {
  auto it = active_.find(id);
  if (it == active_.end() || it->second->output.finished()) return;
  it->second->output.finish(FinishReason::cancelled);
  touched_.push_back(id);
}

Status Engine::plan_step(StepBatch& batch) {
  if (tiers_) collect_tier_completions();
  if (pin_leases_.n_leases() > 0) pin_leases_.expire(kv_, now_unix_s());
  // Speculative decoding: the policy's drafts for this step (0: a plain step, the drafter idle).
  int32_t k_step = drafter_ ? config_.speculative.num_speculative_tokens : 0;
  if (spec_policy_) {
    k_step = spec_policy_->choose(scheduler_.n_running());
    scheduler_.set_num_speculative_tokens(k_step);
  }
  StepPlan plan = scheduler_.schedule(std::chrono::steady_clock::now());
  if (tiers_) start_restores(plan);
  for (SeqId seq : plan.expired) {
    auto it = active_.find(seq);
    if (it == active_.end()) continue;
    it->second->in_scheduler = false;  // the scheduler already removed it
    if (drafter_) drafter_forgets_.push_back(seq);
    it->second->output.finish(FinishReason::deadline,
                              Status(ErrorCode::engine_deadline_exceeded, "the request's deadline passed"));
    touched_.push_back(seq);
  }
  local_stats_.n_preemptions += static_cast<int64_t>(plan.preempted.size());
  const SteadyTime now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<KvLayerSink>> sinks;  // [n_chunks], or empty: no chunk's request has one
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    auto it = active_.find(plan.chunks[i].seq_id);
    if (it == active_.end()) continue;
    if (it->second->request.kv_layer_sink) {
      sinks.resize(plan.chunks.size());
      sinks[i] = it->second->request.kv_layer_sink;
    }
    RequestOutput& out = it->second->output;
    if (out.first_scheduled_at == SteadyTime{}) {
      out.first_scheduled_at = now;
      out.usage.cached_prompt_tokens = scheduler_.cached_prompt_tokens(plan.chunks[i].seq_id);
    }
  }
  DS_TRY(batch.build(std::move(plan), scheduler_));
  batch.set_drafter(drafter_.get(), k_step > 0);
  batch.set_layer_sinks(std::move(sinks));
  if (!state_slots_) return ok_status();
  state_slots_->reclaim([this](SeqId seq) { return scheduler_.contains(seq) && scheduler_.is_running(seq); });
  DS_TRY(batch.assign_state_slots([this](SeqId seq) { return state_slots_->slot_for(seq); }));
  // The step holds an imported state until its forward took it: the request keeps none after (a
  // V4-Flash state is megabytes; the scheduler never adopts an import twice).
  batch.set_state_imports([this](SeqId seq) -> std::shared_ptr<const std::vector<std::byte>> {
    const auto it = active_.find(seq);
    if (it == active_.end() || !it->second->request.state_import) return nullptr;
    return std::move(it->second->request.state_import->bytes);
  });
  return ok_status();
}

Status Engine::launch(StepBatch& batch) {
  DS_TRY(batch.prepare_launch(scheduler_, [this](SeqId seq) {
    auto it = active_.find(seq);
    return it == active_.end() || it->second->output.finished();
  }));
  if (batch.empty()) {
    scheduler_.on_step_done(batch.plan(), {});  // every row was dropped: the step ends here
    return ok_status();
  }
  batch.sample_jobs.clear();
  const std::vector<ScheduledChunk>& chunks = batch.plan().chunks;
  batch.decode_only = true;
  for (size_t i = 0; i < chunks.size(); ++i) {
    ActiveRequest& r = *active_.at(chunks[i].seq_id);
    r.in_flight = true;
    const auto prompt_len = static_cast<int64_t>(r.request.prompt_tokens.size());
    batch.decode_only = batch.decode_only && chunks[i].n_tokens == 1 && chunks[i].pos_begin >= prompt_len;
    if (chunks[i].samples) {
      const bool speculate = drafter_ != nullptr && speculates(r.request);
      batch.sample_jobs.push_back(sample_job(i, r, speculate));
    }
  }
  batch.forget.swap(drafter_forgets_);
  batch.launch_ns = now_ns();
  batch.gap_ns = 0;
  if (last_done_ns_ != 0) {
    batch.gap_ns = batch.launch_ns - last_done_ns_;
    local_stats_.step_gap_ns_total += batch.gap_ns;
    ++local_stats_.n_step_gaps;
  }
  ++local_stats_.n_steps;
  if (executor_) {
    // Sampling runs on the executor too: the engine thread plans the next step meanwhile.
    executor_->launch([this, &batch] { return batch.run(model_, sampler_, sample_vocab_); });
    return ok_status();
  }
  const Status step_status = batch.run(model_, sampler_, sample_vocab_);
  return complete_forward(batch, step_status, now_ns());
}

StepBatch::SampleJob Engine::sample_job(size_t chunk_idx, ActiveRequest& r, bool speculate) const {
  StepBatch::SampleJob job;
  job.chunk_idx = chunk_idx;
  job.params = &r.request.sampling;
  job.penalties = &r.penalties;
  job.position = static_cast<uint64_t>(r.output.n_generated());
  job.matcher = r.grammar_active ? r.matcher.get() : nullptr;
  if (r.matcher && !r.grammar_active) {
    job.dormant_matcher = r.matcher.get();
    job.activation_token = r.request.grammar_after_token;
  }
  job.speculate = speculate;
  job.sampled_drafts = speculate && config_.speculative.draft_sampling == DraftSampling::sampled &&
                       !r.request.sampling.is_greedy();
  return job;
}

Status Engine::wait_and_complete(StepBatch& batch) {
  const Status forward_status = executor_->wait();
  return complete_forward(batch, forward_status, executor_->last_done_ns());
}

Status Engine::complete_forward(StepBatch& batch, const Status& forward_status, int64_t done_ns) {
  local_stats_.forward_ns_total += done_ns - batch.launch_ns;
  last_done_ns_ = done_ns;
  const StepPlan& plan = batch.plan();
  for (const ScheduledChunk& c : plan.chunks) active_.at(c.seq_id)->in_flight = false;
  sampled_.assign(plan.chunks.size(), 0);
  if (!forward_status.ok()) {
    // The model refused the step (a bug in the engine's inputs, or the model's): the requests in it
    // end with the error; the others carry on. The scheduler still sees the step end.
    scheduler_.on_step_done(plan, sampled_);
    for (const ScheduledChunk& c : plan.chunks) {
      active_.at(c.seq_id)->output.finish(FinishReason::error, forward_status);
      touched_.push_back(c.seq_id);
    }
    return ok_status();
  }
  for (const StepBatch::SampleJob& job : batch.sample_jobs)
    sampled_[job.chunk_idx] = batch.samples[job.chunk_idx].token_id;
  if (batch.decode_only) count_decode_only(batch, done_ns);
  if (spec_policy_ && batch.decode_only) {
    spec_policy_->observe_target(batch.forward_rows, static_cast<double>(batch.forward_ns));
    // What the step took besides its forwards: the model's wait for the engine before it, and the
    // executor's own work around them (sampling, masks).
    const int64_t step_ns = batch.gap_ns + (done_ns - batch.launch_ns);
    spec_policy_->observe_step_overhead(static_cast<double>(step_ns - batch.forward_ns - batch.draft_ns));
    local_stats_.spec_decode_step_overhead_ns = spec_policy_->step_overhead_ns();
    local_stats_.spec_decode_target_cost_scale = spec_policy_->target_scale();
  }
  if (drafter_) {
    accepted_.resize(plan.chunks.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      accepted_[i].clear();
      for (const SampleResult& a : batch.accepted_drafts[i]) accepted_[i].push_back(a.token_id);
    }
    count_drafts(batch);
    scheduler_.on_step_done(plan, sampled_,
                            std::span<const std::vector<int32_t>>(accepted_.data(), plan.chunks.size()));
  } else {
    scheduler_.on_step_done(plan, sampled_);
  }
  if (tiers_) {
    // Request::tier_write_chunks: the full blocks a prefill chunk completed go down now (the chunk
    // that samples hands the rest over in on_prompt_committed).
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.samples) continue;  // decode chunks all sample: only prefill chunks get here
      ActiveRequest& r = *active_.at(c.seq_id);
      if (r.request.tier_write_chunks && !r.prompt_tiered && !r.output.finished() &&
          scheduler_.contains(c.seq_id) && scheduler_.is_running(c.seq_id))
        write_to_tiers(c.seq_id, r);
    }
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  for (const StepBatch::SampleJob& job : batch.sample_jobs) {
    const SeqId seq = plan.chunks[job.chunk_idx].seq_id;
    ActiveRequest& r = *active_.at(seq);
    if (r.output.finished()) continue;  // cancelled or stopped while in flight: its token is discarded
    if (r.output.first_token_at == SteadyTime{}) r.output.first_token_at = now;
    const SampleResult& sample = batch.samples[job.chunk_idx];
    // Accepted drafts first, then the sample, each through the grammar and the penalties; a stop
    // among them discards the rest, as a non-speculative run would never have produced them.
    if (drafter_) {
      for (const SampleResult& a : batch.accepted_drafts[job.chunk_idx]) {
        if (r.output.finished()) break;
        if (r.matcher && !advance_grammar(r, a.token_id)) break;
        if (r.request.sampling.has_penalties()) r.penalties.add_output_token(a.token_id);
        r.output.add_token(a);
        ++local_stats_.generation_tokens_total;
        if (r.grammar_active && r.matcher->is_terminated()) r.output.finish(FinishReason::stop);
      }
      if (r.output.finished()) {
        touched_.push_back(seq);
        continue;
      }
    }
    if (r.matcher && !advance_grammar(r, sample.token_id)) {
      touched_.push_back(seq);
      continue;
    }
    if (r.request.sampling.has_penalties()) r.penalties.add_output_token(sample.token_id);
    r.output.add_token(sample);
    // The first token means the whole prompt is computed and committed: its blocks go down now.
    if (!r.prompt_committed) {
      r.prompt_committed = true;
      if (r.request.export_state) export_state(seq, r);
      on_prompt_committed(seq, r);
    } else if (tiers_) {
      write_long_output(seq, r);
    }
    if (config_.jump_forward && r.grammar_active && !r.output.finished()) jump_forward(seq, r);
    // A complete grammar ends the request (the token that completed it is part of the output).
    if (r.grammar_active && r.matcher->is_terminated()) r.output.finish(FinishReason::stop);
    ++local_stats_.generation_tokens_total;
    touched_.push_back(seq);
  }
  return ok_status();
}

void Engine::count_decode_only(const StepBatch& batch, int64_t done_ns) {
  ++local_stats_.decode_only_steps;
  local_stats_.decode_only_ns_total += batch.gap_ns + (done_ns - batch.launch_ns);
  int64_t tokens = static_cast<int64_t>(batch.sample_jobs.size());
  for (size_t i = 0; i < batch.accepted_drafts.size(); ++i)
    tokens += static_cast<int64_t>(batch.accepted_drafts[i].size());
  local_stats_.decode_only_tokens_total += tokens;
}

void Engine::count_drafts(const StepBatch& batch) {
  local_stats_.spec_decode_draft_ns_total += batch.draft_ns;
  local_stats_.spec_decode_verify_ns_total += batch.verify_ns;
  if (spec_policy_ && batch.decode_only) {
    int32_t n_drafting = 0;
    int32_t k = 0;
    for (const int32_t n : batch.n_drafts_verified) {
      n_drafting += n > 0 ? 1 : 0;
      k = std::max(k, n);
    }
    spec_policy_->observe_draft(n_drafting, k, static_cast<double>(batch.draft_ns));
    local_stats_.spec_decode_draft_cost_scale = spec_policy_->draft_scale();
  }
  for (size_t i = 0; i < batch.n_drafts_verified.size(); ++i) {
    const int32_t n_drafts = batch.n_drafts_verified[i];
    if (n_drafts <= 0) continue;
    const size_t n_accepted = batch.accepted_drafts[i].size();
    if (spec_policy_) spec_policy_->record(n_drafts, static_cast<int32_t>(n_accepted));
    ++local_stats_.spec_decode_num_drafts;
    local_stats_.spec_decode_num_draft_tokens += n_drafts;
    local_stats_.spec_decode_num_accepted_tokens += static_cast<int64_t>(n_accepted);
    for (size_t j = 0; j < n_accepted && j < local_stats_.spec_decode_num_accepted_tokens_per_pos.size(); ++j)
      ++local_stats_.spec_decode_num_accepted_tokens_per_pos[j];
  }
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> Engine::compile_grammar(
    const grammar::GrammarSpec& spec) {
  grammar::GrammarCompiler* compiler = nullptr;
  {
    std::lock_guard<std::mutex> lock(grammar_mu_);
    std::string markers;
    for (const std::string& m : spec.marker_tokens) markers += m + '\n';
    std::unique_ptr<grammar::GrammarCompiler>& slot = grammar_compilers_[markers];
    if (!slot) {
      if (tokenizer_ == nullptr) return bad_request("output constraints need the engine to have a tokenizer");
      Result<grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tokenizer_, spec.marker_tokens);
      if (!trie.ok()) {
        grammar_compilers_.erase(markers);
        return trie.status();
      }
      slot = std::make_unique<grammar::GrammarCompiler>(
          std::make_shared<const grammar::TokenTrie>(std::move(trie).value()));
    }
    compiler = slot.get();
  }
  return compiler->compile(spec);  // the compiler locks for itself
}

void Engine::jump_forward(SeqId seq, ActiveRequest& r) {
  if (tokenizer_ == nullptr || r.matcher->is_terminated()) return;
  std::vector<int32_t> forced = grammar::jump_forward_tokens(*r.matcher, *tokenizer_);
  // Room for one sampled token after them: the next chunk samples at its end.
  const int64_t room = r.request.stop.max_tokens - r.output.n_generated() - 1;
  const size_t keep = room <= 0 ? 0 : std::min(forced.size(), static_cast<size_t>(room));
  size_t added = 0;
  for (; added < keep && !r.output.finished(); ++added) {
    SampleResult s;
    s.token_id = forced[added];
    if (r.request.sampling.logprobs) s.logprob = 0.0f;  // not sampled: reported as certain
    r.output.add_token(s);
    if (r.request.sampling.has_penalties()) r.penalties.add_output_token(s.token_id);
  }
  r.matcher->rollback(forced.size() - added);
  if (added == 0) return;
  scheduler_.append_tokens(seq, std::span<const int32_t>(forced.data(), added));
  local_stats_.jump_forward_tokens_total += static_cast<int64_t>(added);
  local_stats_.generation_tokens_total += static_cast<int64_t>(added);
}

bool Engine::advance_grammar(ActiveRequest& r, int32_t token_id) {
  if (!r.grammar_active) {
    r.grammar_active = token_id == r.request.grammar_after_token;
    return true;
  }
  if (token_id < 0 || !r.matcher->accept_token(token_id)) {
    // StepBatch::run samples only allowed tokens; -1 means the mask allowed none.
    r.output.finish(
        FinishReason::error,
        Status(ErrorCode::engine_bad_request,
               token_id < 0 ? "the grammar allows no token of the vocabulary here"
                            : "sampled token " + std::to_string(token_id) + " is outside the grammar"));
    return false;
  }
  return true;
}

void Engine::emit_events() {
  for (RequestId id : touched_) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    ActiveRequest& r = *it->second;
    std::optional<TokenEvent> event = r.output.take_event();
    if (event) r.sink(std::move(*event));
    if (r.output.finished()) finishing_.push_back(id);
  }
  touched_.clear();
}

void Engine::release_finished() {
  drain_kv_events();  // before finished requests leave active_: their scopes are still known
  size_t keep = 0;
  for (RequestId id : finishing_) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;
    ActiveRequest& r = *it->second;
    if (r.in_flight) {
      finishing_[keep++] = id;  // its blocks are being written: release after the step
      continue;
    }
    if (r.in_scheduler) {
      if (tiers_ && scheduler_.contains(id) && scheduler_.is_running(id)) write_to_tiers(id, r);
      if (config_.on_sequence_release && scheduler_.contains(id) && scheduler_.is_running(id))
        config_.on_sequence_release(id, scheduler_.block_table(id), scheduler_.n_computed(id));
      if (drafter_) drafter_forgets_.push_back(id);
      scheduler_.finish(id);
      r.in_scheduler = false;
    }
    if (!r.output.final_event_sent()) {
      finishing_[keep++] = id;
      continue;
    }
    local_stats_.prompt_tokens_total += r.output.usage.prompt_tokens;
    ++local_stats_.requests_finished;
    active_.erase(it);
  }
  finishing_.resize(keep);
  // Duplicates (a request touched twice) would otherwise accumulate.
  std::sort(finishing_.begin(), finishing_.end());
  finishing_.erase(std::unique(finishing_.begin(), finishing_.end()), finishing_.end());
}

void Engine::fail_all(const Status& error) {
  for (auto& [id, r] : active_) {
    if (!r->output.finished()) r->output.finish(FinishReason::error, error);
    touched_.push_back(id);
  }
  emit_events();
  release_finished();
}

void Engine::publish_stats() {
  const KvCacheStats kv = kv_.stats();
  local_stats_.n_running = scheduler_.n_running();
  local_stats_.n_waiting = scheduler_.n_waiting() + static_cast<int32_t>(unadmitted_.size());
  local_stats_.prefill_tokens_pending = scheduler_.prefill_tokens_pending();
  for (const RequestId id : unadmitted_) {
    if (const auto it = active_.find(id); it != active_.end())
      local_stats_.prefill_tokens_pending += static_cast<int64_t>(it->second->request.prompt_tokens.size());
  }
  local_stats_.kv_blocks_total = kv.n_blocks_total;
  local_stats_.kv_blocks_free = kv.n_blocks_free;
  local_stats_.kv_blocks_lent = outside_blocks_.n_lent();
  local_stats_.kv_usage =
      kv.n_blocks_total > 0 ? 1.0 - static_cast<double>(kv.n_blocks_free) / kv.n_blocks_total : 0.0;
  local_stats_.prefix_queries_tokens = kv.prefix_queries_tokens;
  local_stats_.prefix_hit_tokens = kv.prefix_hit_tokens;
  local_stats_.kv_pinned_blocks = pin_leases_.n_blocks();
  local_stats_.kv_pin_leases = pin_leases_.n_leases();
  local_stats_.kv_pins_refused = pin_leases_.n_refused();
  local_stats_.kv_blocks_cached = kv.n_blocks_cached;
  local_stats_.kv_evictions = kv.n_evictions;
  local_stats_.kv_pin_quota_blocks = pin_leases_.max_blocks();
  if (tiers_) {
    const SchedulerStats sched = scheduler_.stats();
    const TierStoreStats tier = tiers_->stats();
    local_stats_.kv_tier_restores = sched.n_restores;
    local_stats_.kv_tier_restored_tokens = sched.n_restored_tokens;
    local_stats_.kv_tier_blocks_written = tier.n_blocks_written;
    local_stats_.kv_tier_write_jobs_dropped = tier.n_write_jobs_dropped;
    local_stats_.kv_tier_write_cpu_ns = tier.write_cpu_ns_total;
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    n_scheduler_waiting_ = local_stats_.n_waiting;
    local_stats_.n_waiting += static_cast<int32_t>(inbox_.size());
    for (const Submission& sub : inbox_)
      local_stats_.prefill_tokens_pending += static_cast<int64_t>(sub.request.prompt_tokens.size());
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = local_stats_;
}

void Engine::collect_tier_completions() {
  TierCompletions done = tiers_->take_completed();
  for (const std::vector<int32_t>& blocks : done.written) {
    for (const int32_t block_id : blocks) kv_.unpin(block_id);
    --n_tier_writes_pending_;
  }
  for (const TierCompletions::Restore& restore : done.restored)
    scheduler_.on_restored(restore.seq_id, restore.n_blocks_restored);
}

void Engine::start_restores(const StepPlan& plan) {
  const size_t block_size = static_cast<size_t>(kv_config_.block_size_tokens);
  for (const RestorePlan& restore : plan.restores) {
    const std::vector<BlockId>& table = scheduler_.block_table(restore.seq_id);
    const std::span<const int32_t> tokens = scheduler_.tokens(restore.seq_id);
    std::vector<TierBlockRef> blocks(restore.keys.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      const size_t block_idx = static_cast<size_t>(restore.first_block) + i;
      blocks[i].key = restore.keys[i];
      blocks[i].prev_key = i == 0 ? restore.prev_key : restore.keys[i - 1];
      blocks[i].block_id = table[block_idx];
      const auto block_tokens = tokens.subspan(block_idx * block_size, block_size);
      blocks[i].tokens.assign(block_tokens.begin(), block_tokens.end());
    }
    tiers_->submit_restore(restore.seq_id, std::move(blocks));
  }
}

int64_t Engine::now_unix_s() const {
  const std::function<int64_t()>& clock =
      config_.now_unix_s ? config_.now_unix_s : config_.kv_tiers.now_unix_s;
  if (clock) return clock();
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t Engine::cache_ttl_s(const Request& request) const {
  return request.cache_ttl_s.value_or(config_.kv_tiers.ttl.ttl_for(request.cache_class));
}

void Engine::export_state(RequestId id, ActiveRequest& r) {
  SequenceState seq;
  seq.n_tokens = static_cast<int64_t>(r.request.prompt_tokens.size());
  if (state_slots_) {
    Result<int32_t> slot = state_slots_->slot_for(id);
    if (!slot.ok()) return r.output.finish(FinishReason::error, slot.status());
    seq.state_slot = *slot;
  }
  // The slot is not in the step that may be running now: the sequence has nothing left to compute.
  Result<std::vector<std::byte>> state = model_.export_sequence_state(seq);
  if (!state.ok()) return r.output.finish(FinishReason::error, state.status());
  r.output.sequence_state = std::make_shared<const std::vector<std::byte>>(std::move(state).value());
}

void Engine::on_prompt_committed(RequestId id, ActiveRequest& r) {
  if (tiers_ && !r.prompt_tiered) {
    r.prompt_tiered = true;
    write_to_tiers(id, r);
  }
  if (r.request.cache_pin) {
    // The prompt's full blocks: the ones a later request with the same prefix can hit.
    const std::vector<BlockId>& table = kv_.block_table(id);
    const size_t n_full =
        std::min(kv_.block_hashes(id).size(),
                 r.request.prompt_tokens.size() / static_cast<size_t>(kv_config_.block_size_tokens));
    std::vector<BlockId> blocks(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(n_full));
    pin_leases_.add(kv_, std::move(blocks), now_unix_s() + cache_ttl_s(r.request), r.request.cache_salt,
                    r.request.cache_key);
  }
}

// A long output's blocks go down every write_every_tokens: a crash, a hang-up or a preemption
// mid-answer keeps what was computed, and a follow-up turn can hit it while the answer is still
// being written.
void Engine::write_long_output(RequestId id, ActiveRequest& r) {
  const int64_t every = config_.kv_tiers.write_every_tokens;
  if (every <= 0) return;
  const int64_t pending_blocks = static_cast<int64_t>(kv_.block_hashes(id).size()) - r.n_blocks_tiered;
  if (pending_blocks * kv_config_.block_size_tokens >= every) write_to_tiers(id, r);
}

void Engine::write_to_tiers(RequestId id, ActiveRequest& r) {
  if (!config_.kv_tiers.writes || !r.request.cache_tier_writes) return;
  const std::vector<uint64_t>& hashes = kv_.block_hashes(id);
  const std::vector<BlockId>& table = kv_.block_table(id);
  const std::span<const int32_t> tokens = scheduler_.tokens(id);
  const size_t block_size = static_cast<size_t>(kv_config_.block_size_tokens);
  const int64_t expires_at_unix_s = now_unix_s() + cache_ttl_s(r.request);
  const TierScope scope{tier_salt_tag(r.request.cache_salt),
                        r.request.cache_key.substr(0, kMaxTierScopeKeyBytes)};
  std::vector<TierBlockRef> blocks;
  for (size_t i = static_cast<size_t>(r.n_blocks_tiered); i < hashes.size(); ++i) {
    TierBlockRef& b = blocks.emplace_back();
    b.key = hashes[i];
    b.prev_key = i == 0 ? 0 : hashes[i - 1];
    b.block_id = table[i];
    b.expires_at_unix_s = expires_at_unix_s;
    b.scope = scope;
    const auto block_tokens = tokens.subspan(i * block_size, block_size);
    b.tokens.assign(block_tokens.begin(), block_tokens.end());
  }
  r.n_blocks_tiered = static_cast<int64_t>(hashes.size());
  if (blocks.empty()) return;
  // Pinned until the writer has copied them: nothing reallocates a block meanwhile. Blocks a tier
  // holds already (restored ones, a shared prefix) are skipped by the writer, not here: asking a
  // remote tier would be a round trip on the engine thread.
  for (const TierBlockRef& b : blocks) kv_.pin(b.block_id);
  std::vector<int32_t> pinned;
  for (const TierBlockRef& b : blocks) pinned.push_back(b.block_id);
  if (tiers_->submit_write(std::move(blocks))) {
    ++n_tier_writes_pending_;
    ++local_stats_.kv_tier_write_jobs;
  } else {
    for (const int32_t block_id : pinned) kv_.unpin(block_id);  // the queue is full: dropped
  }
}

void Engine::loop() {
  StepBatch batches[2];
  int next_idx = 0;
  StepBatch* in_flight = nullptr;
  bool stalled = false;  // the last iteration neither planned nor completed a step
  while (true) {
    const bool idle =
        in_flight == nullptr && touched_.empty() && finishing_.empty() &&
        ((scheduler_.n_waiting() == 0 && scheduler_.n_running() == 0 && unadmitted_.empty()) || stalled);
    if (!take_inbox(idle)) break;
    StepBatch& next = batches[next_idx];
    Status st = plan_step(next);
    const bool completed = in_flight != nullptr;
    if (st.ok() && in_flight != nullptr) {
      st = wait_and_complete(*in_flight);
      in_flight = nullptr;
    }
    // Sequences finished by the step just completed (or cancelled) leave before the next launch,
    // so their rows are dropped and their blocks are free for the step after.
    release_finished();
    stalled = next.empty() && !completed;
    if (st.ok()) {
      st = launch(next);
      if (st.ok() && executor_ && !next.empty()) {
        in_flight = &next;
        next_idx ^= 1;
      }
    }
    emit_events();  // overlaps the forward just launched
    release_finished();
    if (st.ok() && config_.check_integrity) st = scheduler_.check_integrity();
    if (!st.ok()) {
      // An engine bug: nothing can be trusted, every request ends with the error.
      if (in_flight != nullptr) {
        (void)wait_and_complete(*in_flight);
        in_flight = nullptr;
      }
      fail_all(st);
    }
    publish_stats();
  }
  if (in_flight != nullptr) (void)wait_and_complete(*in_flight);
  fail_all(Status(ErrorCode::engine_shutting_down, "the engine shut down before the request finished"));
  drain_kv_events();
  std::vector<Submission> unadmitted;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    unadmitted.swap(inbox_);
    clears_.clear();  // broken promises: their callers get engine_shutting_down
  }
  for (Submission& s : unadmitted) {
    TokenEvent event;
    event.request_id = s.id;
    event.finished = true;
    event.finish_reason = FinishReason::error;
    event.error = Status(ErrorCode::engine_shutting_down, "the engine shut down before the request started");
    event.usage.prompt_tokens = static_cast<int64_t>(s.request.prompt_tokens.size());
    event.queued_at = s.queued_at;
    s.sink(std::move(event));
  }
  publish_stats();
}

}  // namespace ds
