#include "engine/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "base/assert.h"

namespace ds {

Scheduler::Scheduler(const SchedulerConfig& cfg, KvCacheManager& kv) : cfg_(cfg), kv_(kv) {
  DS_ASSERT(cfg.max_step_tokens > 0 && cfg.max_running > 0 && cfg.max_waiting >= 0 && cfg.max_seq_len > 0 &&
                cfg.swa_replay_tokens >= 0,
            "invalid scheduler config");
}

Status Scheduler::add(SeqId seq_id, SeqSpec spec) {
  if (seqs_.contains(seq_id)) {
    return Status(ErrorCode::invalid_argument, fmt::format("sequence {} is already scheduled", seq_id));
  }
  if (spec.prompt_tokens.empty()) return Status(ErrorCode::engine_bad_request, "the prompt is empty");
  if (spec.max_tokens < 1) {
    return Status(ErrorCode::engine_bad_request,
                  fmt::format("max_tokens must be >= 1, got {}", spec.max_tokens));
  }
  const int64_t n_total_tokens = static_cast<int64_t>(spec.prompt_tokens.size()) + spec.max_tokens;
  if (n_total_tokens > cfg_.max_seq_len) {
    return Status(ErrorCode::engine_bad_request,
                  fmt::format("prompt ({} tokens) + max_tokens ({}) exceeds the maximum sequence length {}",
                              spec.prompt_tokens.size(), spec.max_tokens, cfg_.max_seq_len));
  }
  if (kv_.blocks_for_tokens(n_total_tokens) > kv_.stats().n_blocks_total) {
    return Status(
        ErrorCode::engine_bad_request,
        fmt::format("prompt + max_tokens ({} tokens) needs more KV blocks than the cache holds ({})",
                    n_total_tokens, kv_.stats().n_blocks_total));
  }
  if (spec.state_import_at != 0 &&
      (spec.state_import_at < 0 || spec.state_import_at % kv_.block_size_tokens() != 0 ||
       spec.state_import_at >= static_cast<int64_t>(spec.prompt_tokens.size()))) {
    return Status(ErrorCode::engine_bad_request,
                  fmt::format("an imported sequence state at {} tokens is not at a block boundary inside "
                              "the {}-token prompt",
                              spec.state_import_at, spec.prompt_tokens.size()));
  }
  if (waiting_.size() >= cfg_.max_waiting) {
    ++stats_.n_refused_overloaded;
    return Status(ErrorCode::engine_overloaded,
                  fmt::format("the admission queue is full ({} waiting)", waiting_.size()));
  }
  SeqState seq;
  seq.tokens = spec.prompt_tokens;
  seq.spec = std::move(spec);
  seq.arrival_order = next_arrival_order_++;
  waiting_.push(seq_id, seq.spec.priority, seq.spec.tenant, seq.arrival_order, /*resumed=*/false);
  share_.activate(seq.spec.tenant);
  seqs_.emplace(seq_id, std::move(seq));
  return ok_status();
}

const Scheduler::SeqState& Scheduler::state(SeqId seq_id) const {
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "scheduler: unknown sequence");
  return it->second;
}

bool Scheduler::outranks(const SeqState& a, const SeqState& b) {
  if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
  return a.admission_order < b.admission_order;
}

bool Scheduler::is_decode(const SeqState& seq) const {
  return seq.n_scheduled >= static_cast<int64_t>(seq.spec.prompt_tokens.size()) && seq.n_schedulable() == 1;
}

StepPlan Scheduler::schedule(SteadyTime now) {
  StepPlan plan;
  plan.step_index = next_step_index_++;
  ++stats_.n_steps;
  expire(now, plan);
  std::sort(running_.begin(), running_.end(),
            [this](SeqId a, SeqId b) { return outranks(seqs_.at(a), seqs_.at(b)); });
  int32_t budget_tokens = cfg_.max_step_tokens;
  schedule_running(plan, budget_tokens, /*decode_phase=*/true);
  schedule_running(plan, budget_tokens, /*decode_phase=*/false);
  // A step that had to preempt is short of blocks: admitting now would only take back what the
  // preemption freed (or re-admit the victim at once). vLLM's rule too.
  if (plan.preempted.empty()) admit(plan, budget_tokens);
  return plan;
}

void Scheduler::expire(SteadyTime now, StepPlan& plan) {
  std::map<uint64_t, SeqId> expired_by_arrival;  // report in arrival order, independent of hashing
  for (const auto& [seq_id, seq] : seqs_) {
    if (seq.spec.deadline && *seq.spec.deadline <= now) expired_by_arrival.emplace(seq.arrival_order, seq_id);
  }
  for (const auto& [arrival, seq_id] : expired_by_arrival) {
    remove(seq_id);
    plan.expired.push_back(seq_id);
    ++stats_.n_expired;
  }
}

void Scheduler::schedule_running(StepPlan& plan, int32_t& budget_tokens, bool decode_phase) {
  const std::vector<SeqId> by_rank = running_;  // preemption edits running_ while we walk
  for (const SeqId seq_id : by_rank) {
    if (budget_tokens <= 0) return;
    const auto it = seqs_.find(seq_id);
    if (it == seqs_.end() || !it->second.running) continue;  // preempted earlier in this walk
    SeqState& seq = it->second;
    if (seq.last_step_scheduled == plan.step_index || seq.n_schedulable() <= 0) continue;
    // A chunk with drafts in flight: how many positions it keeps is unknown until it is done.
    if (seq.n_draft_in_flight > 0) continue;
    if (is_decode(seq) != decode_phase) continue;
    if (decode_phase) {
      // Draft positions only from free blocks: speculation never preempts anyone.
      int32_t n_draft = draft_positions(seq, budget_tokens);
      while (n_draft > 0 && kv_.blocks_needed(seq_id, seq.n_scheduled + 1 + n_draft) > kv_.n_free_blocks())
        --n_draft;
      if (reserve_blocks(seq_id, seq.n_scheduled + 1 + n_draft, plan))
        add_chunk(seq_id, seq, 1, plan, budget_tokens, n_draft);
      continue;
    }
    int64_t n_tokens = std::min<int64_t>(seq.n_schedulable(), budget_tokens);
    if (!reserve_blocks(seq_id, seq.n_scheduled + n_tokens, plan)) {
      // Not enough even after preempting everything below it: a smaller chunk that fits the
      // blocks it holds plus the free ones still makes progress.
      const int64_t n_capacity =
          static_cast<int64_t>(kv_.block_table(seq_id).size() + static_cast<size_t>(kv_.n_free_blocks())) *
              kv_.block_size_tokens() -
          seq.n_scheduled;
      n_tokens = std::min(n_tokens, n_capacity);
      if (n_tokens <= 0) continue;
      const Status grown = kv_.grow(seq_id, seq.n_scheduled + n_tokens);
      DS_ASSERT(grown.ok(), "grow failed within the free capacity");
    }
    add_chunk(seq_id, seq, static_cast<int32_t>(n_tokens), plan, budget_tokens);
  }
}

bool Scheduler::reserve_blocks(SeqId seq_id, int64_t n_tokens_total, StepPlan& plan) {
  const SeqState& seq = seqs_.at(seq_id);
  while (kv_.blocks_needed(seq_id, n_tokens_total) > kv_.n_free_blocks()) {
    const std::optional<SeqId> victim = pick_victim(seq, plan.step_index);
    if (!victim) return false;
    preempt(*victim, plan);
  }
  const Status grown = kv_.grow(seq_id, n_tokens_total);
  DS_ASSERT(grown.ok(), "grow failed although enough blocks were free");
  return true;
}

std::optional<SeqId> Scheduler::pick_victim(const SeqState& than, uint64_t step_index) const {
  std::optional<SeqId> victim;
  const SeqState* victim_state = nullptr;
  for (const SeqId seq_id : running_) {
    const SeqState& seq = seqs_.at(seq_id);
    // In flight: its blocks are being written. Scheduled this step: it already has a chunk.
    // At max_tokens: the engine is about to finish it and free its blocks anyway.
    if (&seq == &than || !outranks(than, seq) || seq.n_in_flight > 0 ||
        seq.last_step_scheduled == step_index || seq.reached_max_tokens()) {
      continue;
    }
    if (victim_state == nullptr || outranks(*victim_state, seq)) {
      victim = seq_id;
      victim_state = &seq;
    }
  }
  return victim;
}

void Scheduler::preempt(SeqId seq_id, StepPlan& plan) {
  SeqState& seq = seqs_.at(seq_id);
  DS_ASSERT(seq.running && seq.n_in_flight == 0 && seq.n_pending == 0, "preempting a sequence in flight");
  // Recompute: drop the blocks (full ones stay cached, so the re-admission often hits them) and
  // start over from position 0 on re-admission. Its known tokens, generated ones included, stay.
  kv_.close(seq_id);
  running_.erase(std::find(running_.begin(), running_.end(), seq_id));
  seq.running = false;
  seq.n_scheduled = 0;
  seq.n_computed = 0;
  seq.replay_end = 0;
  seq.spec.state_import_at = 0;  // the slot's state is gone: a re-admission replays
  ++seq.n_preemptions;
  ++stats_.n_preemptions;
  waiting_.push(seq_id, seq.spec.priority, seq.spec.tenant, seq.admission_order, /*resumed=*/true);
  plan.preempted.push_back(seq_id);
}

void Scheduler::admit(StepPlan& plan, int32_t& budget_tokens) {
  const int64_t replay_tokens = cfg_.swa_replay_tokens;
  while (budget_tokens > 0 && static_cast<int32_t>(running_.size()) < cfg_.max_running) {
    const std::optional<SeqId> next = waiting_.front(share_);
    if (!next) return;
    const SeqId seq_id = *next;
    SeqState& seq = seqs_.at(seq_id);
    DS_ASSERT(seq.n_pending == 0 && !seq.reached_max_tokens(), "a waiting sequence has nothing to compute");

    // SWA bounded replay: a hit of H tokens is adopted only when H > replay_tokens; the window ring
    // is rebuilt by recomputing [H - replay_tokens, H). A shorter hit would replay from position 0
    // anyway, so it is not adopted (vLLM #56227 does the same).
    const PrefixProbe probe = kv_.probe(seq.tokens, seq.spec.cache_salt);
    if (tier_lookup_ && !seq.restore_tried && try_start_restore(seq_id, seq, probe, plan)) continue;
    // An imported state (P/D) continues the sequence exactly where it was exported: a hit that
    // reaches that position is adopted up to it, without replay.
    const int64_t import_at = seq.spec.state_import_at;
    const bool imports = import_at > 0 && probe.n_hit_tokens >= import_at;
    const bool adopt = imports || probe.n_hit_tokens > replay_tokens;
    const int64_t n_hit_tokens = imports ? import_at : adopt ? probe.n_hit_tokens : 0;
    const bool replays = replay_tokens > 0 && adopt && !imports;
    const int32_t n_revived_blocks = adopt ? probe.n_hit_blocks_free : 0;  // a bound when capped
    const int64_t pos_start = replays ? n_hit_tokens - replay_tokens : n_hit_tokens;
    const int64_t n_first_chunk = std::min<int64_t>(seq.n_known() - pos_start, budget_tokens);
    const int32_t n_new_blocks =
        kv_.blocks_for_tokens(pos_start + n_first_chunk) - kv_.blocks_for_tokens(n_hit_tokens);
    // Admission never preempts: head-of-line waits for blocks to free, keeping the order strict.
    if (n_new_blocks > kv_.n_free_blocks() - n_revived_blocks) return;

    waiting_.erase(seq_id);
    const int64_t n_opened = kv_.open(seq_id, seq.tokens, seq.spec.cache_salt, adopt ? n_hit_tokens : 0);
    DS_ASSERT(n_opened == n_hit_tokens, "prefix match changed between probe and open");
    const Status grown = kv_.grow(seq_id, pos_start + n_first_chunk);
    DS_ASSERT(grown.ok(), "admission grow failed after the free-block check");
    seq.running = true;
    seq.n_scheduled = pos_start;
    seq.n_computed = pos_start;
    seq.replay_end = replays ? n_hit_tokens : 0;
    seq.spec.state_import_at = 0;  // used now or never
    if (seq.admission_order == 0) {
      seq.admission_order = next_admission_order_++;
      seq.cached_prompt_tokens = n_hit_tokens;
    }
    running_.push_back(seq_id);
    ++stats_.n_admitted;
    add_chunk(seq_id, seq, static_cast<int32_t>(n_first_chunk), plan, budget_tokens);
    plan.chunks.back().imports_state = imports;
  }
}

bool Scheduler::try_start_restore(SeqId seq_id, SeqState& seq, const PrefixProbe& probe, StepPlan& plan) {
  seq.restore_tried = true;
  const int64_t block_size = kv_.block_size_tokens();
  // The one-token rule of the pool's match holds for the tiers too.
  const int64_t max_blocks = (seq.n_known() - 1) / block_size;
  const int64_t n_hit_blocks = probe.n_hit_tokens / block_size;
  if (max_blocks <= n_hit_blocks) return false;
  const std::vector<uint64_t> keys = kv_.chain_hashes(seq.tokens, seq.spec.cache_salt, max_blocks);
  int64_t n_blocks = tier_lookup_(std::span<const uint64_t>(keys).subspan(static_cast<size_t>(n_hit_blocks)));
  // Never evict for a restore beyond what is free now (minus the pool hit's revived blocks).
  n_blocks = std::min<int64_t>(n_blocks, kv_.n_free_blocks() - probe.n_hit_blocks_free);
  // A hit the SWA rule would not adopt saves nothing (one that reaches an imported state is adopted).
  const int64_t reach = (n_hit_blocks + n_blocks) * block_size;
  const bool reaches_import = seq.spec.state_import_at > 0 && reach >= seq.spec.state_import_at;
  if (n_blocks <= 0 || (reach <= cfg_.swa_replay_tokens && !reaches_import)) return false;

  waiting_.erase(seq_id);
  const int64_t n_opened = kv_.open_uncounted(seq_id, seq.tokens, seq.spec.cache_salt);
  DS_ASSERT(n_opened == probe.n_hit_tokens, "prefix match changed between probe and open");
  const Status grown = kv_.grow(seq_id, (n_hit_blocks + n_blocks) * block_size);
  DS_ASSERT(grown.ok(), "restore grow failed after the free-block check");
  seq.restoring = true;
  ++n_restoring_;
  ++stats_.n_restores;
  RestorePlan restore;
  restore.seq_id = seq_id;
  restore.first_block = n_hit_blocks;
  restore.prev_key = n_hit_blocks > 0 ? keys[static_cast<size_t>(n_hit_blocks - 1)] : 0;
  restore.keys.assign(keys.begin() + n_hit_blocks, keys.begin() + n_hit_blocks + n_blocks);
  plan.restores.push_back(std::move(restore));
  return true;
}

void Scheduler::on_restored(SeqId seq_id, int32_t n_blocks_restored) {
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || !it->second.restoring) {
    // Removed while its blocks were being filled: they could be released only now.
    if (kv_.is_open(seq_id)) kv_.close(seq_id);
    return;
  }
  SeqState& seq = it->second;
  const int64_t block_size = kv_.block_size_tokens();
  const int64_t n_blocks = static_cast<int64_t>(kv_.block_hashes(seq_id).size()) + n_blocks_restored;
  // Only the blocks that arrived are registered; the rest go back to the free list uncached.
  kv_.commit(seq_id, std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(n_blocks * block_size)));
  kv_.close(seq_id);
  seq.restoring = false;
  --n_restoring_;
  stats_.n_restored_tokens += int64_t{n_blocks_restored} * block_size;
  waiting_.push(seq_id, seq.spec.priority, seq.spec.tenant, seq.arrival_order, /*resumed=*/false);
}

int32_t Scheduler::draft_positions(const SeqState& seq, int32_t budget_tokens) const {
  if (!seq.spec.speculate || cfg_.num_speculative_tokens <= 0) return 0;
  // Every accepted draft is a generated token: leave room for the one sampled after them.
  const int64_t room = seq.spec.max_tokens - seq.n_generated - seq.n_pending - 1;
  return static_cast<int32_t>(
      std::max<int64_t>(0, std::min<int64_t>({cfg_.num_speculative_tokens, room, budget_tokens - 1})));
}

void Scheduler::add_chunk(SeqId seq_id, SeqState& seq, int32_t n_tokens, StepPlan& plan,
                          int32_t& budget_tokens, int32_t n_draft_tokens) {
  ScheduledChunk chunk;
  chunk.seq_id = seq_id;
  chunk.pos_begin = seq.n_scheduled;
  chunk.n_tokens = n_tokens;
  chunk.samples = seq.n_scheduled + n_tokens == seq.n_known();
  chunk.replay_end = seq.n_scheduled < seq.replay_end ? seq.replay_end : 0;
  chunk.n_draft_tokens = chunk.samples ? n_draft_tokens : 0;
  seq.n_scheduled += n_tokens;
  if (chunk.samples) ++seq.n_pending;
  ++seq.n_in_flight;
  if (chunk.n_draft_tokens > 0) ++seq.n_draft_in_flight;
  seq.last_step_scheduled = plan.step_index;
  plan.chunks.push_back(chunk);
  const int32_t n_positions = n_tokens + chunk.n_draft_tokens;
  plan.n_tokens += n_positions;
  budget_tokens -= n_positions;
  share_.charge(seq.spec.tenant, n_positions);
}

void Scheduler::on_step_done(const StepPlan& plan, std::span<const int32_t> sampled) {
  on_step_done(plan, sampled, {});
}

void Scheduler::on_step_done(const StepPlan& plan, std::span<const int32_t> sampled,
                             std::span<const std::vector<int32_t>> accepted_drafts) {
  DS_ASSERT(sampled.size() == plan.chunks.size(), "on_step_done needs one sampled entry per chunk");
  DS_ASSERT(accepted_drafts.empty() || accepted_drafts.size() == plan.chunks.size(),
            "on_step_done needs no accepted drafts or one entry per chunk");
  DS_ASSERT(plan.step_index == next_done_step_index_, "steps must complete in the order they were planned");
  ++next_done_step_index_;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& chunk = plan.chunks[i];
    const auto it = seqs_.find(chunk.seq_id);
    if (it == seqs_.end()) continue;  // finished, cancelled or expired while in flight: row dropped
    SeqState& seq = it->second;
    DS_ASSERT(seq.running && seq.n_in_flight > 0, "step result for a sequence with nothing in flight");
    --seq.n_in_flight;
    const std::span<const int32_t> accepted =
        accepted_drafts.empty() ? std::span<const int32_t>{} : std::span<const int32_t>(accepted_drafts[i]);
    DS_ASSERT(static_cast<int64_t>(accepted.size()) <= chunk.n_draft_tokens,
              "more drafts accepted than planned");
    const int64_t n_accepted = static_cast<int64_t>(accepted.size());
    seq.n_computed = std::max(seq.n_computed, chunk.pos_begin + chunk.n_tokens + n_accepted);
    if (chunk.samples) {
      seq.tokens.insert(seq.tokens.end(), accepted.begin(), accepted.end());
      seq.tokens.push_back(sampled[i]);
      seq.n_generated += static_cast<int32_t>(n_accepted) + 1;
      --seq.n_pending;
    }
    if (chunk.n_draft_tokens > 0) {
      --seq.n_draft_in_flight;
      // Accepted drafts were computed in this chunk; the rejected ones' positions are forgotten and
      // the blocks that held only them go back to the pool.
      seq.n_scheduled = std::max(seq.n_scheduled, chunk.pos_begin + chunk.n_tokens + n_accepted);
      kv_.shrink(chunk.seq_id, seq.n_scheduled);
    }
    DS_ASSERT(seq.n_computed <= static_cast<int64_t>(seq.tokens.size()),
              "computed a position of unknown value");
    kv_.commit(chunk.seq_id, std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(seq.n_computed)));
  }
}

void Scheduler::append_tokens(SeqId seq_id, std::span<const int32_t> tokens) {
  SeqState& seq = seqs_.at(seq_id);
  DS_ASSERT(seq.n_pending == 0 && seq.n_in_flight == 0, "append_tokens on a sequence with a step in flight");
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  seq.n_generated += static_cast<int32_t>(tokens.size());
}

void Scheduler::remove(SeqId seq_id) {
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "scheduler: remove of an unknown sequence");
  if (it->second.running) {
    kv_.close(seq_id);
    running_.erase(std::find(running_.begin(), running_.end(), seq_id));
  } else if (it->second.restoring) {
    // The restore thread may still write its blocks: on_restored() releases them.
    --n_restoring_;
  } else {
    const bool erased = waiting_.erase(seq_id);
    DS_ASSERT(erased, "a sequence neither running nor queued");
  }
  share_.deactivate(it->second.spec.tenant);
  seqs_.erase(it);
}

void Scheduler::finish(SeqId seq_id) {
  if (seqs_.contains(seq_id)) remove(seq_id);
}

bool Scheduler::contains(SeqId seq_id) const { return seqs_.contains(seq_id); }
std::span<const int32_t> Scheduler::tokens(SeqId seq_id) const { return state(seq_id).tokens; }
int64_t Scheduler::n_generated(SeqId seq_id) const { return state(seq_id).n_generated; }
int64_t Scheduler::n_computed(SeqId seq_id) const { return state(seq_id).n_computed; }
int64_t Scheduler::cached_prompt_tokens(SeqId seq_id) const { return state(seq_id).cached_prompt_tokens; }
int32_t Scheduler::n_preemptions(SeqId seq_id) const { return state(seq_id).n_preemptions; }
bool Scheduler::is_running(SeqId seq_id) const { return state(seq_id).running; }

const std::vector<BlockId>& Scheduler::block_table(SeqId seq_id) const {
  const SeqState& seq = state(seq_id);
  return seq.running || seq.restoring ? kv_.block_table(seq_id) : empty_table_;
}

int32_t Scheduler::n_waiting() const { return waiting_.size(); }
int32_t Scheduler::n_running() const { return static_cast<int32_t>(running_.size()); }

int64_t Scheduler::prefill_tokens_pending() const {
  int64_t n = 0;
  for (const auto& [id, seq] : seqs_) {
    // Every known token but the last sampled one (a decode step's input) is prompt work.
    const int64_t known = static_cast<int64_t>(seq.tokens.size()) - (seq.n_generated > 0 ? 1 : 0);
    n += std::max<int64_t>(0, known - seq.n_computed);
  }
  return n;
}

Status Scheduler::check_integrity() const {
  DS_TRY(kv_.check_integrity());
  DS_TRY(waiting_.check_integrity());
  DS_TRY(share_.check_integrity());
  auto bug = [](SeqId seq_id, std::string_view what) {
    return Status(ErrorCode::internal, fmt::format("sequence {}: {}", seq_id, what));
  };
  if (static_cast<int32_t>(running_.size()) > cfg_.max_running) {
    return Status(ErrorCode::internal,
                  fmt::format("{} running > max_running {}", running_.size(), cfg_.max_running));
  }
  if (running_.size() + static_cast<size_t>(waiting_.size()) + static_cast<size_t>(n_restoring_) !=
      seqs_.size()) {
    return Status(ErrorCode::internal,
                  fmt::format("{} running + {} waiting + {} restoring != {} sequences", running_.size(),
                              waiting_.size(), n_restoring_, seqs_.size()));
  }
  for (const SeqId seq_id : running_) {
    const auto it = seqs_.find(seq_id);
    if (it == seqs_.end() || !it->second.running) return bug(seq_id, "in the running set but not running");
  }
  std::map<std::string, int32_t> n_seqs_by_tenant;
  std::unordered_map<BlockId, const std::string*> salt_of_block;
  for (const auto& [seq_id, seq] : seqs_) {
    ++n_seqs_by_tenant[seq.spec.tenant];
    if ((seq.running || seq.restoring) != kv_.is_open(seq_id))
      return bug(seq_id, "running state and KV table disagree");
    if (seq.restoring) {
      if (seq.running || waiting_.contains(seq_id))
        return bug(seq_id, "restoring but also running or queued");
      if (seq.n_scheduled != 0 || seq.n_in_flight != 0)
        return bug(seq_id, "restoring with positions in flight");
      continue;
    }
    if (seq.running == waiting_.contains(seq_id)) return bug(seq_id, "both running and queued, or neither");
    if (static_cast<int64_t>(seq.tokens.size()) !=
        static_cast<int64_t>(seq.spec.prompt_tokens.size()) + seq.n_generated) {
      return bug(seq_id, "token count is not prompt + generated");
    }
    if (seq.n_generated + seq.n_pending > seq.spec.max_tokens)
      return bug(seq_id, "generated past max_tokens");
    if (seq.n_pending < 0 || seq.n_in_flight < 0 || seq.n_pending > seq.n_in_flight) {
      return bug(seq_id, "pending samples without a step in flight");
    }
    if (!(0 <= seq.n_computed && seq.n_computed <= seq.n_scheduled && seq.n_scheduled <= seq.n_known())) {
      return bug(seq_id, fmt::format("positions out of order: computed {} scheduled {} known {}",
                                     seq.n_computed, seq.n_scheduled, seq.n_known()));
    }
    if (!seq.running) {
      if (seq.n_scheduled != 0 || seq.n_in_flight != 0) return bug(seq_id, "queued with positions in flight");
      continue;
    }
    if (seq.admission_order == 0) return bug(seq_id, "running without an admission order");
    if (kv_.blocks_needed(seq_id, seq.n_scheduled) != 0)
      return bug(seq_id, "scheduled positions lack KV blocks");
    // Tenants isolated by salt never share a block.
    for (const BlockId block_id : kv_.block_table(seq_id)) {
      const auto [at, inserted] = salt_of_block.emplace(block_id, &seq.spec.cache_salt);
      if (!inserted && *at->second != seq.spec.cache_salt) return bug(seq_id, "shares a block across salts");
    }
  }
  for (const auto& [tenant, n_seqs] : n_seqs_by_tenant) {
    if (share_.n_seqs(tenant) != n_seqs) {
      return Status(ErrorCode::internal, fmt::format("tenant '{}' has {} sequences but fair share counts {}",
                                                     tenant, n_seqs, share_.n_seqs(tenant)));
    }
  }
  if (share_.n_active_tenants() != static_cast<int32_t>(n_seqs_by_tenant.size())) {
    return Status(ErrorCode::internal, "fair share tracks a tenant without sequences");
  }
  return ok_status();
}

}  // namespace ds
