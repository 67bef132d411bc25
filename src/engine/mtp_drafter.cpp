#include "engine/mtp_drafter.h"

#include <algorithm>
#include <cstring>

#include "sampling/sampler.h"

namespace ds {

MtpDrafter::MtpDrafter(ModelRunner& model, size_t sample_vocab)
    : model_(model), sample_vocab_(sample_vocab), hidden_size_(model.config().hidden_size) {}

Status MtpDrafter::propose(std::span<DraftChunk> chunks) {
  const size_t H = static_cast<size_t>(hidden_size_);
  // Draft 1 comes from the last observe(); a sequence whose MTP state does not end right before this
  // chunk's token (new, restarted, or a failed step) drafts nothing this time.
  size_t longest = 0;
  for (DraftChunk& c : chunks) {
    c.n_filled = 0;
    const auto it = states_.find(c.seq_id);
    if (c.draft.empty() || it == states_.end() || it->second.n_mtp_tokens != c.pos_begin ||
        it->second.first_draft < 0) {
      continue;
    }
    c.draft[0] = it->second.first_draft;
    c.n_filled = 1;
    longest = std::max(longest, c.draft.size());
  }
  // Drafts 2..k: the MTP row at position pos_begin + j - 1 takes (its own previous output, draft j)
  // and predicts draft j + 1. All sequences still drafting go in one forward_mtp per j.
  for (size_t j = 1; j < longest; ++j) {
    requests_.clear();
    chunk_of_request_.clear();
    for (size_t i = 0; i < chunks.size(); ++i) {
      DraftChunk& c = chunks[i];
      if (c.n_filled != static_cast<int32_t>(j) || c.draft.size() <= j) continue;
      c.seq->n_mtp_tokens = c.pos_begin + static_cast<int64_t>(j) - 1;
      // Chain input: the state's row for draft 2, then this chunk's row of the previous chain step.
      const float* hidden = j == 1 ? states_.at(c.seq_id).hidden.data() : chain_hidden_.data() + i * H;
      MtpRequest r;
      r.seq = c.seq;
      r.next_tokens = std::span<const int32_t>(c.draft.data() + j - 1, 1);
      r.hidden = hidden;
      r.all_logits = false;
      r.draft = true;
      requests_.push_back(r);
      chunk_of_request_.push_back(i);
    }
    if (requests_.empty()) break;
    DS_TRY(model_.forward_mtp(requests_, out_));
    chain_hidden_.resize(chunks.size() * H);  // [n_chunks, H], indexed by chunk
    for (size_t q = 0; q < requests_.size(); ++q) {
      DraftChunk& c = chunks[chunk_of_request_[q]];
      const int64_t row = out_.row_begin[q + 1] - 1;
      c.draft[j] = argmax(std::span<const float>(out_.logits.row(row), sample_vocab_));
      c.n_filled = static_cast<int32_t>(j) + 1;
      std::memcpy(chain_hidden_.data() + chunk_of_request_[q] * H,
                  out_.hidden.row(out_.hidden_row_begin[q + 1] - 1), H * sizeof(float));
    }
  }
  // The chain's rows are scratch: the next observe() rewrites them from the target's hidden states.
  for (DraftChunk& c : chunks) c.seq->n_mtp_tokens = c.pos_begin;
  return ok_status();
}

Status MtpDrafter::observe(std::span<const ObservedChunk> chunks) {
  const size_t H = static_cast<size_t>(hidden_size_);
  requests_.clear();
  chunk_of_request_.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ObservedChunk& c = chunks[i];
    if (c.n_kept <= 0) {
      states_.erase(c.seq_id);
      continue;
    }
    // A sequence seen for the first time, or restarted (preemption, prefix hit), starts its MTP state
    // at the chunk: rows below come from the cached prefix's blocks (kv_cache.h, MTP caveat).
    SeqDraftState& state = states_[c.seq_id];
    state.n_mtp_tokens = c.pos_begin;
    c.seq->n_mtp_tokens = c.pos_begin;
    MtpRequest r;
    r.seq = c.seq;
    r.next_tokens = c.next_tokens.first(static_cast<size_t>(c.n_kept));
    r.hidden = c.hidden;
    r.all_logits = false;
    requests_.push_back(r);
    chunk_of_request_.push_back(i);
  }
  if (requests_.empty()) return ok_status();
  const Status st = model_.forward_mtp(requests_, out_);
  if (!st.ok()) {
    for (const size_t i : chunk_of_request_) states_.erase(chunks[i].seq_id);
    return st;
  }
  for (size_t q = 0; q < requests_.size(); ++q) {
    const ObservedChunk& c = chunks[chunk_of_request_[q]];
    SeqDraftState& state = states_.at(c.seq_id);
    state.n_mtp_tokens = c.pos_begin + c.n_kept;
    const int64_t row = out_.row_begin[q + 1] - 1;
    state.first_draft =
        c.wants_draft ? argmax(std::span<const float>(out_.logits.row(row), sample_vocab_)) : -1;
    const float* h = out_.hidden.row(out_.hidden_row_begin[q + 1] - 1);
    state.hidden.assign(h, h + H);
  }
  return ok_status();
}

}  // namespace ds
