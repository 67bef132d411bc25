#include "engine/step_batch.h"

#include "base/clock.h"
#include "grammar/token_bitmask.h"
#include "sampling/philox.h"
#include "sampling/rejection_sampling.h"

#include <algorithm>
#include <future>
#include <string>
#include <utility>

namespace ds {

Status StepBatch::build(StepPlan plan, const Scheduler& scheduler) {
  plan_ = std::move(plan);
  const size_t n_chunks = plan_.chunks.size();
  seqs_.resize(n_chunks);
  tokens_.clear();
  token_begin_.assign(1, 0);
  pending_.assign(n_chunks, 0);
  n_draft_.assign(n_chunks, 0);
  next_token_.assign(n_chunks, -1);
  state_import_.clear();
  context_.resize(n_chunks);
  requests_.clear();
  for (size_t i = 0; i < n_chunks; ++i) {
    const ScheduledChunk& c = plan_.chunks[i];
    SequenceState& seq = seqs_[i];
    const std::vector<BlockId>& table = scheduler.block_table(c.seq_id);
    seq.block_table.assign(table.begin(), table.end());
    seq.n_tokens = c.pos_begin;
    seq.n_mtp_tokens = 0;
    const std::span<const int32_t> known = scheduler.tokens(c.seq_id);
    const int64_t end = c.pos_begin + c.n_tokens;
    const int64_t n_known = static_cast<int64_t>(known.size());
    seq.prompt_len = n_known - scheduler.n_generated(c.seq_id);  // V4.1 decoder replay (decoder_replay.h)
    if (c.n_tokens <= 0 || c.pos_begin > n_known || end > n_known + 1) {
      return Status(ErrorCode::internal, "step " + std::to_string(plan_.step_index) + ": chunk of sequence " +
                                             std::to_string(c.seq_id) + " covers [" +
                                             std::to_string(c.pos_begin) + ", " + std::to_string(end) +
                                             ") but " + std::to_string(n_known) + " tokens are known");
    }
    const int64_t copy_end = end <= n_known ? end : n_known;
    tokens_.insert(tokens_.end(), known.begin() + c.pos_begin, known.begin() + copy_end);
    if (end > n_known) {
      pending_[i] = 1;
      tokens_.push_back(-1);  // placeholder: the previous step's sample
    }
    if (end < n_known) next_token_[i] = known[static_cast<size_t>(end)];
    context_[i].clear();
    if (c.n_draft_tokens > 0) {
      n_draft_[i] = c.n_draft_tokens;
      context_[i].assign(known.begin(), known.begin() + copy_end);
      tokens_.insert(tokens_.end(), static_cast<size_t>(c.n_draft_tokens),
                     0);  // draft slots (propose_drafts)
    }
    token_begin_.push_back(static_cast<int64_t>(tokens_.size()));
  }
  return ok_status();
}

Status StepBatch::assign_state_slots(const std::function<Result<int32_t>(SeqId)>& slot_for) {
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    DS_ASSIGN_OR_RETURN(const int32_t slot, slot_for(plan_.chunks[i].seq_id));
    seqs_[i].state_slot = slot;
  }
  return ok_status();
}

void StepBatch::set_state_imports(
    const std::function<std::shared_ptr<const std::vector<std::byte>>(SeqId)>& state_of) {
  state_import_.assign(plan_.chunks.size(), nullptr);
  for (size_t i = 0; i < plan_.chunks.size(); ++i)
    if (plan_.chunks[i].imports_state) state_import_[i] = state_of(plan_.chunks[i].seq_id);
}

Status StepBatch::prepare_launch(const Scheduler& scheduler, const std::function<bool(SeqId)>& is_dropped) {
  size_t kept = 0;
  size_t write = 0;  // compaction of tokens_ runs in place
  std::vector<int64_t> kept_begin{0};
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    const ScheduledChunk c = plan_.chunks[i];
    const int64_t b = token_begin_[i];
    const int64_t e = token_begin_[i + 1];
    if (is_dropped(c.seq_id)) continue;
    if (pending_[i]) {
      const std::span<const int32_t> known = scheduler.tokens(c.seq_id);
      const int64_t pos = c.pos_begin + c.n_tokens - 1;
      if (pos >= static_cast<int64_t>(known.size())) {
        return Status(ErrorCode::internal, "step " + std::to_string(plan_.step_index) + ": sequence " +
                                               std::to_string(c.seq_id) + " has no token at position " +
                                               std::to_string(pos) + " after the previous step");
      }
      tokens_[static_cast<size_t>(b + c.n_tokens - 1)] = known[static_cast<size_t>(pos)];
      // A drafting chunk's context ends with its token (planned while it was being sampled).
      if (n_draft_[i] > 0) context_[i].push_back(known[static_cast<size_t>(pos)]);
    }
    for (int64_t t = b; t < e; ++t) tokens_[write++] = tokens_[static_cast<size_t>(t)];
    if (kept != i) {
      plan_.chunks[kept] = c;
      seqs_[kept] = std::move(seqs_[i]);
      n_draft_[kept] = n_draft_[i];
      next_token_[kept] = next_token_[i];
      if (i < state_import_.size()) state_import_[kept] = std::move(state_import_[i]);
      if (i < layer_sinks_.size()) layer_sinks_[kept] = std::move(layer_sinks_[i]);
      context_[kept] = std::move(context_[i]);
    }
    kept_begin.push_back(static_cast<int64_t>(write));
    ++kept;
  }
  plan_.chunks.resize(kept);
  seqs_.resize(kept);
  n_draft_.resize(kept);
  next_token_.resize(kept);
  if (state_import_.size() > kept) state_import_.resize(kept);
  if (layer_sinks_.size() > kept) layer_sinks_.resize(kept);
  context_.resize(kept);
  tokens_.resize(write);
  token_begin_ = std::move(kept_begin);
  pending_.assign(kept, 0);
  plan_.n_tokens = static_cast<int32_t>(write);
  requests_.resize(kept);
  for (size_t i = 0; i < kept; ++i) {
    const size_t b = static_cast<size_t>(token_begin_[i]);
    const size_t n = static_cast<size_t>(token_begin_[i + 1]) - b;
    requests_[i] = ForwardRequest{&seqs_[i], std::span<const int32_t>(tokens_.data() + b, n), n_draft_[i] > 0,
                                  plan_.chunks[i].replay_end};
    requests_[i].all_hidden = drafting_ && drafter_->needs_hidden();
    requests_[i].may_truncate = n_draft_[i] > 0;  // the verify keeps a prefix of the drafts
  }
  return ok_status();
}

namespace {

// The sample of a grammar row whose mask allows no token: the engine ends the request with an error.
SampleResult no_allowed_token() {
  SampleResult r;
  r.token_id = -1;
  return r;
}

}  // namespace

bool StepBatch::set_layer_calls(ModelRunner& model) {
  layer_calls_.clear();
  const int64_t bs = model.kv_cache_config().block_size_tokens;
  for (size_t i = 0; i < layer_sinks_.size() && i < requests_.size(); ++i) {
    if (!layer_sinks_[i] || bs <= 0) continue;
    // The blocks whose last row this chunk writes (drafts are not final: a verify may reject them).
    const int64_t from = seqs_[i].n_tokens;
    const int64_t to = from + static_cast<int64_t>(requests_[i].tokens.size()) - n_draft_[i];
    const int64_t first = from / bs, last = std::min<int64_t>(to / bs, seqs_[i].block_table.size());
    if (last <= first) continue;
    layer_calls_.push_back(
        {layer_sinks_[i].get(), first,
         std::vector<int32_t>(seqs_[i].block_table.begin() + first, seqs_[i].block_table.begin() + last)});
  }
  if (layer_calls_.empty()) return false;
  return model.set_kv_layer_done([this](int layer) {
    for (const LayerCall& c : layer_calls_) c.sink->layer_done(layer, c.first_block, c.pool_ids);
  });
}

Status StepBatch::run(ModelRunner& model, Sampler& sampler, size_t sample_vocab) {
  n_drafts_verified.assign(plan_.chunks.size(), 0);
  accepted_drafts.resize(plan_.chunks.size());
  for (auto& a : accepted_drafts) a.clear();
  if (drafter_ != nullptr) {
    for (const SeqId seq : forget) drafter_->forget(seq);
  }
  forget.clear();
  sample_vocab_ = sample_vocab;
  // Drafts first: a drafter may walk a grammar's matcher along its drafts (rolled back before it
  // returns), which the mask thread below must not see.
  draft_ns = verify_ns = 0;
  const int64_t t0 = now_ns();
  Status forward_status = drafting_ ? propose_drafts() : ok_status();
  const int64_t t1 = now_ns();
  // Grammar masks depend only on tokens already accepted, so they are computed on a helper thread
  // while the forward runs; unconstrained steps start no thread at all.
  size_t n_grammar = 0;
  size_t words = 0;
  for (const SampleJob& job : sample_jobs) {
    if (job.matcher == nullptr) continue;
    ++n_grammar;
    words = std::max(words, grammar::bitmask_words(job.matcher->grammar().vocab().vocab_size()));
  }
  std::future<void> masks_done;
  if (n_grammar > 0) {
    grammar_masks_.assign(n_grammar * words, 0);
    masks_done = std::async(std::launch::async, [this, words] {
      size_t g = 0;
      for (const SampleJob& job : sample_jobs) {
        if (job.matcher == nullptr) continue;
        job.matcher->fill_next_token_mask(std::span<uint32_t>(grammar_masks_.data() + g * words, words));
        ++g;
      }
    });
  }
  forward_ns = forward_rows = 0;
  for (size_t i = 0; i < state_import_.size() && forward_status.ok(); ++i) {
    if (state_import_[i]) forward_status = model.import_sequence_state(seqs_[i], *state_import_[i]);
  }
  if (forward_status.ok()) {
    for (const ForwardRequest& r : requests_) forward_rows += static_cast<int64_t>(r.tokens.size());
    const bool by_layer = set_layer_calls(model);
    const int64_t t_forward = now_ns();
    forward_status = model.forward(requests_, out_);
    forward_ns = now_ns() - t_forward;
    if (by_layer) model.set_kv_layer_done(nullptr);
    layer_calls_.clear();  // the sinks are needed during the forward only: none is kept past it
    layer_sinks_.clear();
  }
  if (masks_done.valid()) masks_done.get();
  DS_TRY(forward_status);
  samples.resize(plan_.chunks.size());
  size_t g = 0;
  for (const SampleJob& job : sample_jobs) {
    std::span<const uint32_t> mask;
    if (job.matcher != nullptr) mask = std::span<const uint32_t>(grammar_masks_.data() + g++ * words, words);
    if (n_drafts_verified[job.chunk_idx] > 0) {
      verify(job, sampler, sample_vocab, mask);
      continue;
    }
    std::span<const float> row(sample_row(job.chunk_idx), sample_vocab);
    if (job.matcher != nullptr) {
      // Unconstrained rows skip this entirely; a grammar row pays one masked copy of its row.
      row = masked(row, mask);
      if (row.empty()) {
        samples[job.chunk_idx] = no_allowed_token();
        continue;
      }
    }
    samples[job.chunk_idx] = sampler.sample(row, *job.params, *job.penalties, job.position, /*draft_slot=*/0);
  }
  if (!drafting_) return ok_status();
  const int64_t t2 = now_ns();
  const Status observed = observe_kept();
  draft_ns = (t1 - t0) + (now_ns() - t2);
  verify_ns = t2 - t1;
  return observed;
}

std::span<const float> StepBatch::masked(std::span<const float> row, std::span<const uint32_t> mask) {
  bool any = false;
  for (size_t w = 0; w < std::min(mask.size(), grammar::bitmask_words(row.size())) && !any; ++w)
    any = mask[w] != 0;
  if (!any) return {};
  masked_row_.assign(row.begin(), row.end());
  grammar::apply_bitmask(masked_row_, mask);
  return masked_row_;
}

Status StepBatch::propose_drafts() {
  draft_chunks_.clear();
  draft_chunk_idx_.clear();
  std::vector<const SampleJob*> job_of(plan_.chunks.size(), nullptr);
  for (const SampleJob& job : sample_jobs) job_of[job.chunk_idx] = &job;
  draft_probs_begin_.assign(plan_.chunks.size(), -1);
  size_t n_probs = 0;
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    if (n_draft_[i] > 0 && job_of[i] != nullptr && job_of[i]->sampled_drafts) {
      draft_probs_begin_[i] = static_cast<int64_t>(n_probs);
      n_probs += static_cast<size_t>(n_draft_[i]) * sample_vocab_;
    }
  }
  draft_probs_.resize(n_probs);
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    if (n_draft_[i] <= 0) continue;
    const ScheduledChunk& c = plan_.chunks[i];
    DraftChunk d;
    d.seq_id = c.seq_id;
    d.seq = &seqs_[i];
    d.pos_begin = c.pos_begin + c.n_tokens - 1;
    d.context = context_[i];
    d.draft =
        std::span<int32_t>(tokens_.data() + token_begin_[i] + c.n_tokens, static_cast<size_t>(n_draft_[i]));
    if (job_of[i] != nullptr && !pending_[i]) d.matcher = job_of[i]->matcher;
    if (draft_probs_begin_[i] >= 0) {
      d.sampling = job_of[i]->params;
      d.position = job_of[i]->position;
      d.draft_probs = std::span<float>(draft_probs_.data() + draft_probs_begin_[i],
                                       static_cast<size_t>(n_draft_[i]) * sample_vocab_);
    }
    draft_chunks_.push_back(d);
    draft_chunk_idx_.push_back(i);
  }
  if (draft_chunks_.empty()) return ok_status();
  // The forward's rows besides one token row per drafting chunk and the drafts: prefill chunks,
  // decode rows that do not draft, and a drafting chunk's rows before its last token.
  int64_t other_rows = 0;
  for (const ScheduledChunk& c : plan_.chunks) other_rows += c.n_tokens;
  other_rows -= static_cast<int64_t>(draft_chunks_.size());
  DS_TRY(drafter_->propose(draft_chunks_, other_rows));
  for (size_t q = 0; q < draft_chunks_.size(); ++q) {
    const DraftChunk& d = draft_chunks_[q];
    const size_t i = draft_chunk_idx_[q];
    if (d.n_filled < 0 || d.n_filled > n_draft_[i]) {
      return Status(ErrorCode::internal, "drafter filled " + std::to_string(d.n_filled) + " of " +
                                             std::to_string(n_draft_[i]) + " draft slots");
    }
    // Unfilled slots are not verified: the chunk shrinks to its token plus the proposals.
    n_drafts_verified[i] = d.n_filled;
    const size_t n = static_cast<size_t>(plan_.chunks[i].n_tokens + d.n_filled);
    requests_[i].tokens = std::span<const int32_t>(tokens_.data() + token_begin_[i], n);
  }
  return ok_status();
}

void StepBatch::verify(const SampleJob& job, Sampler& sampler, size_t sample_vocab,
                       std::span<const uint32_t> first_mask) {
  const size_t i = job.chunk_idx;
  const int32_t n_drafts = n_drafts_verified[i];
  const int32_t* drafts = tokens_.data() + token_begin_[i] + plan_.chunks[i].n_tokens;
  // Every token of the chunk has a logits row; the one of the chunk's last known token comes first.
  const int64_t first_row = out_.row_begin[i] + plan_.chunks[i].n_tokens - 1;
  // The state a run without drafts would sample output position job.position + j in: the grammar
  // advanced by the accepted drafts (undone at the end: the engine advances it once the step is
  // complete) and the penalties counting them.
  grammar::GrammarMatcher* matcher = job.matcher;
  size_t n_advanced = 0;
  const PenaltyState* penalties = job.penalties;
  if (job.params->has_penalties()) {
    draft_penalties_ = *job.penalties;
    penalties = &draft_penalties_;
  }
  for (int32_t j = 0; j <= n_drafts; ++j) {
    std::span<const float> row(out_.logits.row(first_row + j), sample_vocab);
    if (matcher != nullptr) {
      // Row 0's mask was computed during the forward; later rows see the drafts accepted before them.
      std::span<const uint32_t> mask = first_mask;
      if (j > 0) {
        draft_row_mask_.assign(grammar::bitmask_words(matcher->grammar().vocab().vocab_size()), 0);
        matcher->fill_next_token_mask(draft_row_mask_);
        mask = draft_row_mask_;
      }
      row = masked(row, mask);
      if (row.empty()) {
        samples[i] = no_allowed_token();
        break;
      }
    }
    if (j == n_drafts) {
      // Every draft accepted: the token after them is the plain keyed sample of the last row.
      samples[i] = sampler.sample(row, *job.params, *penalties, job.position + static_cast<uint64_t>(j),
                                  /*draft_slot=*/0);
      break;
    }
    const DraftCheck check = check_draft(job, sampler, row, *penalties, j);
    if (!check.accepted) {
      samples[i] = check.result;
      break;
    }
    const int32_t token = drafts[j];
    if (matcher != nullptr) {
      if (!matcher->accept_token(token)) {  // the masked row never gives a token outside it
        samples[i] = no_allowed_token();
        break;
      }
      ++n_advanced;
      if (matcher->is_terminated()) {
        // The draft completes the grammar: it is the step's token, and the request ends with it.
        samples[i] = check.result;
        break;
      }
    } else if (job.dormant_matcher != nullptr && token == job.activation_token) {
      matcher = job.dormant_matcher;  // the grammar starts after this token (the token is not in it)
    }
    if (penalties == &draft_penalties_) draft_penalties_.add_output_token(token);
    accepted_drafts[i].push_back(check.result);
  }
  if (matcher != nullptr) matcher->rollback(n_advanced);
}

// Greedy drafts: accepted when the keyed sample a run without drafts draws at this output position
// (same logits row by batch invariance, same key) equals the draft, so the output is the same token
// for token whatever the drafts were. Sampled drafts, Leviathan et al. / Chen et al.: draft j was
// drawn from q_j; accept it with min(1, p_j / q_j), else the token is drawn from
// norm(max(0, p_j - q_j)). p_j is the distribution the request's own sample of the row draws from
// (Sampler::distribution, after the grammar mask and penalties), so every output token follows it.
StepBatch::DraftCheck StepBatch::check_draft(const SampleJob& job, Sampler& sampler,
                                             std::span<const float> row, const PenaltyState& penalties,
                                             int32_t j) {
  const size_t i = job.chunk_idx;
  const int32_t draft = tokens_[static_cast<size_t>(token_begin_[i] + plan_.chunks[i].n_tokens + j)];
  const SamplingParams& params = *job.params;
  const uint64_t position = job.position + static_cast<uint64_t>(j);
  if (draft_probs_begin_[i] < 0) {
    const SampleResult r = sampler.sample(row, params, penalties, position, /*draft_slot=*/0);
    return DraftCheck{r.token_id == draft, r};
  }
  const size_t vocab = row.size();
  std::span<const float> q(draft_probs_.data() + draft_probs_begin_[i] + j * vocab, vocab);
  target_probs_.resize(vocab);
  sampler.distribution(row, params, penalties, target_probs_);
  if (q[static_cast<size_t>(draft)] <= 0.0f) {
    // A drafter that proposed without filling q: the draft is a point mass, for which the same rule
    // accepts with p(d) and resamples from p without d.
    point_mass_.assign(vocab, 0.0f);
    point_mass_[static_cast<size_t>(draft)] = 1.0f;
    q = point_mass_;
  }
  const DraftVerdict v =
      accept_or_resample(target_probs_, q, draft, philox_uniform(params.seed, position, kAcceptDrawSlot),
                         philox_uniform(params.seed, position, kResampleDrawSlot), residual_);
  return DraftCheck{v.accepted, sampler.score(row, params, penalties, v.token)};
}

Status StepBatch::observe_kept() {
  if (out_.hidden_row_begin.size() != plan_.chunks.size() + 1)
    return Status(ErrorCode::internal, "the model returned no hidden rows per request for the drafter");
  observed_.clear();
  observed_tokens_.clear();
  size_t n_tokens_total = 0;
  for (size_t i = 0; i < plan_.chunks.size(); ++i)
    n_tokens_total += static_cast<size_t>(plan_.chunks[i].n_tokens) + accepted_drafts[i].size();
  observed_tokens_.reserve(n_tokens_total);  // spans below point into it
  std::vector<uint8_t> speculate(plan_.chunks.size(), 0), constrained(plan_.chunks.size(), 0);
  for (const SampleJob& job : sample_jobs) {
    speculate[job.chunk_idx] = job.speculate ? (job.sampled_drafts ? 2 : 1) : 0;
    constrained[job.chunk_idx] = job.matcher != nullptr || job.dormant_matcher != nullptr;
  }
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    const ScheduledChunk& c = plan_.chunks[i];
    const int32_t n_kept = c.n_tokens + static_cast<int32_t>(accepted_drafts[i].size());
    const int32_t last = c.samples ? samples[i].token_id : next_token_[i];
    ObservedChunk o;
    o.seq_id = c.seq_id;
    o.seq = &seqs_[i];
    o.pos_begin = c.pos_begin;
    o.wants_draft = speculate[i] != 0;
    o.sampled_draft = speculate[i] == 2;
    o.constrained_draft = o.wants_draft && constrained[i] != 0;
    if (last >= 0 && c.replay_end == 0) {
      // Position p's next token: the chunk's own tokens (accepted drafts included), then `last`.
      const size_t begin = observed_tokens_.size();
      const int32_t* chunk_tokens = tokens_.data() + token_begin_[i];
      observed_tokens_.insert(observed_tokens_.end(), chunk_tokens + 1, chunk_tokens + n_kept);
      observed_tokens_.push_back(last);
      o.n_kept = n_kept;
      o.next_tokens = std::span<const int32_t>(observed_tokens_.data() + begin, static_cast<size_t>(n_kept));
      o.hidden = out_.hidden.row(out_.hidden_row_begin[i]);
    }
    observed_.push_back(o);
  }
  return drafter_->observe(observed_);
}

const float* StepBatch::sample_row(size_t chunk_idx) const {
  return out_.logits.row(out_.row_begin[chunk_idx + 1] - 1);
}

}  // namespace ds
