#include "engine/step_batch.h"

#include "grammar/token_bitmask.h"

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
      tokens_[static_cast<size_t>(e - 1)] = known[static_cast<size_t>(pos)];
    }
    for (int64_t t = b; t < e; ++t) tokens_[write++] = tokens_[static_cast<size_t>(t)];
    if (kept != i) {
      plan_.chunks[kept] = c;
      seqs_[kept] = std::move(seqs_[i]);
    }
    kept_begin.push_back(static_cast<int64_t>(write));
    ++kept;
  }
  plan_.chunks.resize(kept);
  seqs_.resize(kept);
  tokens_.resize(write);
  token_begin_ = std::move(kept_begin);
  pending_.assign(kept, 0);
  plan_.n_tokens = static_cast<int32_t>(write);
  requests_.resize(kept);
  for (size_t i = 0; i < kept; ++i) {
    const size_t b = static_cast<size_t>(token_begin_[i]);
    const size_t n = static_cast<size_t>(token_begin_[i + 1]) - b;
    requests_[i] = ForwardRequest{&seqs_[i], std::span<const int32_t>(tokens_.data() + b, n), false,
                                  plan_.chunks[i].replay_end};
  }
  return ok_status();
}

Status StepBatch::run(ModelRunner& model, Sampler& sampler, size_t sample_vocab) {
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
  const Status forward_status = model.forward(requests_, out_);
  if (masks_done.valid()) masks_done.get();
  DS_TRY(forward_status);
  samples.resize(plan_.chunks.size());
  size_t g = 0;
  for (const SampleJob& job : sample_jobs) {
    std::span<const float> row(sample_row(job.chunk_idx), sample_vocab);
    if (job.matcher != nullptr) {
      // Unconstrained rows skip this entirely; a grammar row pays one masked copy of its row.
      const std::span<const uint32_t> mask(grammar_masks_.data() + g * words, words);
      ++g;
      masked_row_.assign(row.begin(), row.end());
      grammar::apply_bitmask(masked_row_, mask);
      bool any = false;
      for (size_t w = 0; w < std::min(words, grammar::bitmask_words(sample_vocab)) && !any; ++w)
        any = mask[w] != 0;
      if (!any) {
        samples[job.chunk_idx] = SampleResult{};
        samples[job.chunk_idx].token_id = -1;  // the engine ends the request with an error
        continue;
      }
      row = masked_row_;
    }
    samples[job.chunk_idx] = sampler.sample(row, *job.params, *job.penalties, job.position, /*draft_slot=*/0);
  }
  return ok_status();
}

const float* StepBatch::sample_row(size_t chunk_idx) const {
  return out_.logits.row(out_.row_begin[chunk_idx + 1] - 1);
}

}  // namespace ds
