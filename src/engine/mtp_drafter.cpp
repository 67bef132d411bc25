#include "engine/mtp_drafter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "grammar/token_bitmask.h"
#include "sampling/philox.h"
#include "sampling/rejection_sampling.h"

namespace ds {

MtpDrafter::MtpDrafter(ModelRunner& model, size_t sample_vocab, std::vector<int32_t> draft_vocab)
    : model_(model),
      sample_vocab_(sample_vocab),
      draft_vocab_(std::move(draft_vocab)),
      hidden_size_(model.config().hidden_size) {}

int32_t MtpDrafter::greedy(std::span<const float> logits) const {
  const int32_t c = argmax(logits);
  return draft_vocab_.empty() ? c : draft_vocab_[static_cast<size_t>(c)];
}

void MtpDrafter::pick(DraftChunk& c, size_t j, std::span<const float> logits) {
  if (c.sampling == nullptr) {
    c.draft[j] = greedy(logits);
    return;
  }
  // q over the whole sampled vocabulary (0 outside the draft vocabulary): the distribution the
  // draft is drawn from, which is all the rejection rule needs of it.
  const std::span<float> q = c.draft_probs.subspan(j * sample_vocab_, sample_vocab_);
  if (draft_vocab_.empty()) {
    sampler_.distribution(logits, *c.sampling, no_penalties_, q);
  } else {
    sub_probs_.resize(logits.size());
    sampler_.distribution(logits, *c.sampling, no_penalties_, sub_probs_);
    std::fill(q.begin(), q.end(), 0.0f);
    for (size_t t = 0; t < sub_probs_.size(); ++t) q[static_cast<size_t>(draft_vocab_[t])] = sub_probs_[t];
  }
  c.draft[j] = draw_from(q, philox_uniform(c.sampling->seed, c.position + j, kDraftDrawSlot));
}

bool MtpDrafter::mask_to_grammar(grammar::GrammarMatcher& matcher, std::span<float> logits) {
  const size_t vocab = matcher.grammar().vocab().vocab_size();
  mask_.assign(grammar::bitmask_words(vocab), 0);
  matcher.fill_next_token_mask(mask_);
  bool any = false;
  for (size_t col = 0; col < logits.size(); ++col) {
    const size_t id = draft_vocab_.empty() ? col : static_cast<size_t>(draft_vocab_[col]);
    if (id < vocab && grammar::bitmask_test(mask_, static_cast<int32_t>(id))) {
      any = true;
    } else {
      logits[col] = -std::numeric_limits<float>::infinity();
    }
  }
  return any;
}

bool MtpDrafter::advance(DraftChunk& c, size_t i, size_t j) {
  if (!c.matcher->accept_token(c.draft[j])) return false;
  ++advanced_[i];
  return !c.matcher->is_terminated();
}

void MtpDrafter::roll_back_matchers(std::span<DraftChunk> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i)
    if (advanced_[i] > 0) chunks[i].matcher->rollback(advanced_[i]);
}

Status MtpDrafter::propose(std::span<DraftChunk> chunks, int64_t /*other_rows*/) {
  const size_t H = static_cast<size_t>(hidden_size_);
  advanced_.assign(chunks.size(), 0);
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
    if (c.matcher != nullptr) {  // structured output: the first draft among the tokens it allows
      if (it->second.logits.size() != logits_width()) continue;
      if (c.sampling != nullptr && c.draft_probs.size() != c.draft.size() * sample_vocab_) continue;
      masked_.assign(it->second.logits.begin(), it->second.logits.end());
      if (!mask_to_grammar(*c.matcher, masked_)) continue;
      pick(c, 0, masked_);
    } else if (c.sampling != nullptr) {
      if (it->second.logits.size() != logits_width() ||
          c.draft_probs.size() != c.draft.size() * sample_vocab_) {
        continue;  // observed as greedy (the mode changed): no sampled first draft
      }
      pick(c, 0, it->second.logits);
    } else {
      c.draft[0] = it->second.first_draft;
    }
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
      if (c.matcher != nullptr && !advance(c, i, j - 1)) continue;  // the grammar ends or refuses it
      c.seq->n_mtp_tokens = c.pos_begin + static_cast<int64_t>(j) - 1;
      // Chain input: the state's row for draft 2, then this chunk's row of the previous chain step.
      const float* hidden = j == 1 ? states_.at(c.seq_id).hidden.data() : chain_hidden_.data() + i * H;
      MtpRequest r;
      r.seq = c.seq;
      r.next_tokens = std::span<const int32_t>(c.draft.data() + j - 1, 1);
      r.hidden = hidden;
      r.all_logits = false;
      r.draft = true;
      r.draft_vocab = !draft_vocab_.empty();
      requests_.push_back(r);
      chunk_of_request_.push_back(i);
    }
    if (requests_.empty()) break;
    if (const Status st = model_.forward_mtp(requests_, out_); !st.ok()) {
      roll_back_matchers(chunks);
      return st;
    }
    chain_hidden_.resize(chunks.size() * H);  // [n_chunks, H], indexed by chunk
    for (size_t q = 0; q < requests_.size(); ++q) {
      DraftChunk& c = chunks[chunk_of_request_[q]];
      const int64_t row = out_.row_begin[q + 1] - 1;
      std::span<const float> logits(out_.logits.row(row), logits_width());
      if (c.matcher != nullptr) {
        masked_.assign(logits.begin(), logits.end());
        if (!mask_to_grammar(*c.matcher, masked_)) continue;  // nothing the grammar allows: stop here
        logits = masked_;
      }
      pick(c, j, logits);
      c.n_filled = static_cast<int32_t>(j) + 1;
      std::memcpy(chain_hidden_.data() + chunk_of_request_[q] * H,
                  out_.hidden.row(out_.hidden_row_begin[q + 1] - 1), H * sizeof(float));
    }
  }
  roll_back_matchers(chunks);
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
    r.draft_vocab = !draft_vocab_.empty();
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
    const std::span<const float> logits(out_.logits.row(row), logits_width());
    state.first_draft = c.wants_draft ? greedy(logits) : -1;
    if (c.wants_draft && (c.sampled_draft || c.constrained_draft)) {  // the row, not only its argmax
      state.logits.assign(logits.begin(), logits.end());
    } else {
      state.logits.clear();
    }
    const float* h = out_.hidden.row(out_.hidden_row_begin[q + 1] - 1);
    state.hidden.assign(h, h + H);
  }
  return ok_status();
}

}  // namespace ds
