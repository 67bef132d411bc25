#include "engine/dspark_drafter.h"

#include <algorithm>

#include "sampling/philox.h"
#include "sampling/rejection_sampling.h"

namespace ds {

DsparkDrafter::DsparkDrafter(ModelRunner& model, size_t sample_vocab)
    : model_(model),
      drafts_(*model.draft_block_model()),
      sample_vocab_(sample_vocab),
      hidden_size_(model.config().hidden_size),
      vocab_(model.config().vocab_size) {}

void DsparkDrafter::pick(DraftChunk& c, size_t j, std::span<const float> z) {
  if (c.sampling == nullptr) {
    c.draft[j] = argmax(z);
    return;
  }
  const std::span<float> q = c.draft_probs.subspan(j * sample_vocab_, sample_vocab_);
  sampler_.distribution(z, *c.sampling, no_penalties_, q);
  c.draft[j] = draw_from(q, philox_uniform(c.sampling->seed, c.position + j, kDraftDrawSlot));
}

Status DsparkDrafter::propose(std::span<DraftChunk> chunks, int64_t other_rows) {
  confidences_.assign(chunks.size(), {});
  requests_.clear();
  chunk_of_request_.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    DraftChunk& c = chunks[i];
    c.n_filled = 0;
    if (c.draft.empty() || c.context.empty() || drafts_.fed(*c.seq) != c.pos_begin) continue;
    if (c.sampling != nullptr && c.draft_probs.size() != c.draft.size() * sample_vocab_) continue;
    requests_.push_back(DraftBlockRequest{c.seq, c.context.back(), c.pos_begin});
    chunk_of_request_.push_back(i);
  }
  if (requests_.empty()) return ok_status();
  DS_TRY(drafts_.draft(requests_, out_));
  const int64_t B = drafts_.block_size();
  z_.resize(static_cast<size_t>(vocab_));
  for (size_t q = 0; q < requests_.size(); ++q) {
    DraftChunk& c = chunks[chunk_of_request_[q]];
    const size_t n = std::min<size_t>(c.draft.size(), static_cast<size_t>(B));
    std::vector<float>& conf = confidences_[chunk_of_request_[q]];
    int32_t prev = requests_[q].anchor;
    for (size_t j = 0; j < n; ++j) {
      const int64_t row = static_cast<int64_t>(q) * B + static_cast<int64_t>(j);
      std::copy_n(out_.logits.row(row), vocab_, z_.data());
      drafts_.add_markov_bias(prev, z_);
      conf.push_back(drafts_.confidence({out_.hidden.row(row), static_cast<size_t>(hidden_size_)}, prev));
      pick(c, j, {z_.data(), sample_vocab_});
      prev = c.draft[j];
    }
    c.n_filled = static_cast<int32_t>(n);
  }
  if (schedule_.active()) {
    const std::vector<int32_t> keep = schedule_.lengths(confidences_, other_rows);
    for (size_t i = 0; i < chunks.size(); ++i) chunks[i].n_filled = std::min(chunks[i].n_filled, keep[i]);
  }
  return ok_status();
}

Status DsparkDrafter::observe(std::span<const ObservedChunk> chunks) {
  for (const ObservedChunk& c : chunks) {
    if (c.n_kept <= 0 || c.hidden == nullptr) continue;  // a failed chunk: the next one starts over
    DS_TRY(drafts_.extend(*c.seq, c.pos_begin,
                          {c.hidden, static_cast<size_t>(int64_t{c.n_kept} * hidden_size_)}));
  }
  return ok_status();
}

}  // namespace ds
