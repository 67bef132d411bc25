// DsparkDrafter: drafts with the checkpoint's DSpark stages (DeepSeek-V4.1; docs/dspark.md) through
// the model's DraftBlockModel.
//
// observe() feeds the model the target's context features of every position it keeps (the hidden
// rows of the verify/prefill forward); propose() runs one draft block [token, noise × 4] per
// decode chunk — all chunks in one call — and walks each block's rows left to right: row j's base
// logits plus the Markov bias of the token before it give draft j (greedy: argmax over the sampled
// vocabulary; sampled drafts: drawn from the request's distribution over them), and its
// confidence c_j. A chunk drafts at most the block size; with a schedule (set_schedule) only the
// prefix confidence-scheduled verification picks for it (the paper's Algorithm 1).
//
// A sequence whose fed context does not end right before its chunk's token (new, restarted, a step
// run without the drafter) drafts nothing that step; its next observed chunk starts the context
// over.
//
// Thread contract: one thread at a time (the one running the engine's steps).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/confidence_schedule.h"
#include "engine/drafter.h"
#include "engine/speculation_policy.h"
#include "model/model_runner.h"
#include "sampling/sampler.h"

namespace ds {

class DsparkDrafter final : public Drafter {
 public:
  // Precondition: model.draft_block_model() != nullptr; it outlives the drafter. Drafts are taken
  // from the first sample_vocab logits columns.
  DsparkDrafter(ModelRunner& model, size_t sample_vocab);

  bool needs_hidden() const override { return true; }
  Status propose(std::span<DraftChunk> chunks, int64_t other_rows) override;
  Status observe(std::span<const ObservedChunk> chunks) override;
  void forget(SeqId /*seq_id*/) override {}  // the context lives in the model's state slot

  // Confidence-scheduled verification (engine/confidence_schedule.h, ConfidenceScheduler): from
  // now on each propose() keeps, per chunk, the prefix of its drafts the schedule picks under this
  // curve of the target's step time, with propose's other_rows as the step's base; `delayed`:
  // DeepInfer's production variant (capacity from two proposes back). Empty: every chunk keeps all
  // its drafts.
  void set_schedule(std::vector<CostPoint> target, bool delayed = false) {
    schedule_ = ConfidenceScheduler(std::move(target), delayed);
  }

  // The confidences of the last propose(): chunk i's c_0 .. c_{m − 1} for the m drafts its block
  // gave (empty where it drafted nothing); n_filled may be fewer under a schedule.
  const std::vector<std::vector<float>>& confidences() const { return confidences_; }

 private:
  // Fills draft[j] (and, sampled, draft_probs row j) from the row's logits z over the sampled
  // vocabulary.
  void pick(DraftChunk& c, size_t j, std::span<const float> z);

  ModelRunner& model_;
  DraftBlockModel& drafts_;
  size_t sample_vocab_;
  int64_t hidden_size_;
  int64_t vocab_;
  Sampler sampler_;
  PenaltyState no_penalties_;  // sampled drafts are for requests without penalties
  std::vector<std::vector<float>> confidences_;
  ConfidenceScheduler schedule_;
  // Scratch reused across steps.
  std::vector<DraftBlockRequest> requests_;
  std::vector<size_t> chunk_of_request_;
  DraftBlockOutput out_;
  std::vector<float> z_;
};

}  // namespace ds
