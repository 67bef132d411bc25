// MtpDrafter: drafts with the checkpoint's own MTP layer (DeepSeek-V3), reused autoregressively for
// k tokens (docs/speculative.md).
//
// Per sequence it keeps the MTP layer's cache in step with the target: after every target step,
// observe() runs the MTP rows of exactly the positions the target kept (hidden state at p + token at
// p + 1), in one forward_mtp over all sequences. The last row's logits give the first draft of the
// next step and its output hidden row seeds the chain: propose() then feeds the MTP layer its own
// output for drafts 2..k (rows past the target's n_tokens, MtpRequest::draft), which the next
// observe() overwrites with the real rows. Drafts are greedy (argmax over the sampled vocabulary),
// or drawn from the layer's distribution under the request's sampling params for sampled drafts
// (DraftChunk::sampling); under a grammar (DraftChunk::matcher) each is taken among the tokens the
// grammar allows after the drafts before it, the matcher advanced along the chain and rolled back.
//
// Thread contract: one thread at a time (the one running the engine's steps).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/drafter.h"
#include "model/model_runner.h"
#include "sampling/sampler.h"

namespace ds {

class MtpDrafter final : public Drafter {
 public:
  // Precondition: model.supports_mtp_drafting(); it outlives the drafter. sample_vocab: drafts are
  // taken from the first sample_vocab logits columns.
  // draft_vocab: the token ids the model's draft head was restricted to
  // (ModelRunner::set_mtp_draft_vocab, each < sample_vocab); empty: the full head.
  MtpDrafter(ModelRunner& model, size_t sample_vocab, std::vector<int32_t> draft_vocab = {});

  bool needs_hidden() const override { return true; }
  Status propose(std::span<DraftChunk> chunks, int64_t other_rows) override;
  Status observe(std::span<const ObservedChunk> chunks) override;
  void forget(SeqId seq_id) override { states_.erase(seq_id); }

  // Sequences with drafting state (tests).
  size_t n_states() const { return states_.size(); }

 private:
  struct SeqDraftState {
    int64_t n_mtp_tokens = 0;   // MTP rows [0, n) are final (== the target's kept positions)
    int32_t first_draft = -1;   // the MTP's guess for position n_mtp_tokens + 1; -1 = none
    std::vector<float> hidden;  // [hidden_size] the MTP output at row n_mtp_tokens - 1 (chain input)
    std::vector<float>
        logits;  // that row's logits (the draft vocabulary), for a sampled or constrained first draft
  };
  // Structured output: the columns of `logits` the matcher does not allow set to -inf; false when it
  // allows none of them (drafting stops there).
  bool mask_to_grammar(grammar::GrammarMatcher& matcher, std::span<float> logits);
  // Chunk i's matcher accepts draft[j]; false (no draft after it) when it refuses it or the grammar ended.
  bool advance(DraftChunk& c, size_t i, size_t j);
  // Every chunk's matcher back to where propose() found it.
  void roll_back_matchers(std::span<DraftChunk> chunks);
  // Fills draft[j] (and, sampled, draft_probs row j) from a logits row (over the draft vocabulary).
  void pick(DraftChunk& c, size_t j, std::span<const float> logits);
  // The greedy draft of a logits row: its argmax, as a token id.
  int32_t greedy(std::span<const float> logits) const;
  size_t logits_width() const { return draft_vocab_.empty() ? sample_vocab_ : draft_vocab_.size(); }

  ModelRunner& model_;
  size_t sample_vocab_;
  std::vector<int32_t> draft_vocab_;  // column c of the MTP logits is token draft_vocab_[c] (empty: c)
  std::vector<float> sub_probs_;      // sampled drafts: q over the draft vocabulary
  int64_t hidden_size_;
  std::unordered_map<SeqId, SeqDraftState> states_;
  // Scratch reused across steps.
  std::vector<MtpRequest> requests_;
  std::vector<size_t> chunk_of_request_;
  std::vector<float> chain_hidden_;  // [n_requests, hidden_size] the previous chain step's output
  std::vector<size_t> advanced_;     // per chunk: tokens its matcher accepted in this propose()
  std::vector<uint32_t> mask_;       // a grammar's next-token mask
  std::vector<float> masked_;        // a masked copy of a logits row
  LogitsOutput out_;
  Sampler sampler_;
  PenaltyState no_penalties_;  // sampled drafts are for requests without penalties
};

}  // namespace ds
