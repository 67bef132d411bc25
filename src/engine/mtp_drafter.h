// MtpDrafter: drafts with the checkpoint's own MTP layer (DeepSeek-V3), reused autoregressively for
// k tokens (docs/speculative.md).
//
// Per sequence it keeps the MTP layer's cache in step with the target: after every target step,
// observe() runs the MTP rows of exactly the positions the target kept (hidden state at p + token at
// p + 1), in one forward_mtp over all sequences. The last row's logits give the first draft of the
// next step and its output hidden row seeds the chain: propose() then feeds the MTP layer its own
// output for drafts 2..k (rows past the target's n_tokens, MtpRequest::draft), which the next
// observe() overwrites with the real rows. Drafts are greedy (argmax over the sampled vocabulary).
//
// Thread contract: one thread at a time (the one running the engine's steps).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/drafter.h"
#include "model/model_runner.h"

namespace ds {

class MtpDrafter final : public Drafter {
 public:
  // Precondition: model.supports_mtp_drafting(); it outlives the drafter. sample_vocab: drafts are
  // taken from the first sample_vocab logits columns.
  MtpDrafter(ModelRunner& model, size_t sample_vocab);

  bool needs_hidden() const override { return true; }
  Status propose(std::span<DraftChunk> chunks) override;
  Status observe(std::span<const ObservedChunk> chunks) override;
  void forget(SeqId seq_id) override { states_.erase(seq_id); }

  // Sequences with drafting state (tests).
  size_t n_states() const { return states_.size(); }

 private:
  struct SeqDraftState {
    int64_t n_mtp_tokens = 0;   // MTP rows [0, n) are final (== the target's kept positions)
    int32_t first_draft = -1;   // the MTP's guess for position n_mtp_tokens + 1; -1 = none
    std::vector<float> hidden;  // [hidden_size] the MTP output at row n_mtp_tokens - 1 (chain input)
  };

  ModelRunner& model_;
  size_t sample_vocab_;
  int64_t hidden_size_;
  std::unordered_map<SeqId, SeqDraftState> states_;
  // Scratch reused across steps.
  std::vector<MtpRequest> requests_;
  std::vector<size_t> chunk_of_request_;
  std::vector<float> chain_hidden_;  // [n_requests, hidden_size] the previous chain step's output
  LogitsOutput out_;
};

}  // namespace ds
