// StepBatch: the model inputs of one engine step, built from the scheduler's StepPlan. Two of them
// alternate under async scheduling: one is in flight on the executor while the engine thread
// builds the other, so nothing here is shared with the step being computed (block tables and
// tokens are copied; the scheduler's storage may change meanwhile).
//
// A decode chunk planned before the previous step's sample is known has a pending last token;
// prepare_launch() fills it from the scheduler once on_step_done() has recorded it, and drops the
// rows of sequences that finished meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/drafter.h"
#include "engine/scheduler.h"
#include "grammar/grammar_matcher.h"
#include "model/model_runner.h"
#include "sampling/sampler.h"

namespace ds {

class StepBatch {
 public:
  // Copies the plan's chunks: block tables and every token known now. Reuses capacity.
  // internal when a chunk needs more than one token the scheduler does not know yet (a bug).
  Status build(StepPlan plan, const Scheduler& scheduler);

  // Drops the chunks whose sequence `is_dropped` says finished, fills pending tokens from the
  // scheduler and makes the ForwardRequests. internal when a pending token is still unknown.
  Status prepare_launch(const Scheduler& scheduler, const std::function<bool(SeqId)>& is_dropped);

  bool empty() const { return plan_.chunks.empty(); }
  const StepPlan& plan() const { return plan_; }
  std::span<const ForwardRequest> requests() const { return requests_; }
  int64_t n_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  LogitsOutput& output() { return out_; }
  const LogitsOutput& output() const { return out_; }
  // The logits row chunk i samples from (its last token's), after the forward.
  const float* sample_row(size_t chunk_idx) const;

  // What the step samples, fixed at launch so that sampling can run on the executor right after
  // the forward: one job per sampling chunk. The pointers name engine request records, which stay
  // alive and unchanged while the step is in flight.
  struct SampleJob {
    size_t chunk_idx = 0;
    const SamplingParams* params = nullptr;
    const PenaltyState* penalties = nullptr;
    uint64_t position = 0;  // the output token's index in its request (the RNG counter)
    // Structured output: the row is masked to the tokens this matcher allows before sampling. Read on
    // the executor; the engine thread advances it only after the step completes.
    grammar::GrammarMatcher* matcher = nullptr;
    // A grammar that starts after a token (Request::grammar_after_token) and has not started yet:
    // verification switches to it after an accepted draft equal to activation_token (null: none).
    grammar::GrammarMatcher* dormant_matcher = nullptr;
    int32_t activation_token = -1;
    bool speculate = false;  // the request drafts (its MTP state should produce a first draft)
    // Its drafts are sampled and verified by rejection sampling (SpeculativeConfig::draft_sampling,
    // temperature > 0), not greedy and verified by equality.
    bool sampled_drafts = false;
  };
  std::vector<SampleJob> sample_jobs;
  std::vector<SampleResult> samples;  // [n_chunks], filled for the chunks of sample_jobs
  // Speculative decoding: [n_chunks] the drafts of chunk i the target accepted (they come before
  // samples[i] in the output), and how many drafts it verified.
  std::vector<std::vector<SampleResult>> accepted_drafts;
  std::vector<int32_t> n_drafts_verified;
  // ... and where a drafting step's time went: the drafter (propose + observe) and the target
  // forward with the sampling and verification after it (0 in a step without drafts).
  int64_t draft_ns = 0;
  int64_t verify_ns = 0;
  // The target forward alone (every step) and its rows (chunk tokens and drafts): the speculation
  // policy's observed cost.
  int64_t forward_ns = 0;
  int64_t forward_rows = 0;

  // Speculative decoding: the drafter that fills the chunks' draft positions (null: none) and
  // whether it runs in this step (a step the engine's policy runs plainly has no drafts, and the
  // drafter neither proposes nor observes). Set before prepare_launch(); it must outlive the step.
  void set_drafter(Drafter* drafter, bool drafting) {
    drafter_ = drafter;
    drafting_ = drafter != nullptr && drafting;
  }
  // Sequences the drafter forgets when this step runs, before it proposes: the drafter is used only
  // by the thread running steps (the executor under async scheduling).
  std::vector<SeqId> forget;

  // forward() then every sample job; the samples draw only from the first sample_vocab columns.
  // Grammar jobs' masks are computed on a helper thread during the forward.
  Status run(ModelRunner& model, Sampler& sampler, size_t sample_vocab);

  int64_t launch_ns = 0;     // when the forward started (engine bookkeeping)
  int64_t gap_ns = 0;        // engine-thread time between the previous forward's end and this launch
  bool decode_only = false;  // every chunk is one generated token (no prompt rows): EngineStats

  // Models with per-sequence state (V4): names each chunk's state slot (after build()).
  Status assign_state_slots(const std::function<Result<int32_t>(SeqId)>& slot_for);
  // ... and, for a chunk that imports a sequence state (ScheduledChunk::imports_state), its bytes:
  // the model takes them into the chunk's slot right before the forward.
  void set_state_imports(const std::function<std::shared_ptr<const std::vector<std::byte>>(SeqId)>& state_of);
  // ... and each chunk's request's KvLayerSink ([n_chunks], null: none; empty: no chunk has one),
  // told during the forward which blocks the chunk completed as each layer ends.
  void set_layer_sinks(std::vector<std::shared_ptr<KvLayerSink>> sinks) { layer_sinks_ = std::move(sinks); }

 private:
  // Points the model's per-layer callback at the chunks' sinks for the coming forward; false: no
  // sink has a completed block, or the model cannot report layers.
  bool set_layer_calls(ModelRunner& model);

  StepPlan plan_;
  std::vector<SequenceState> seqs_;   // [n_chunks]
  std::vector<int32_t> tokens_;       // chunk tokens, concatenated
  std::vector<int64_t> token_begin_;  // [n_chunks + 1] offsets into tokens_
  std::vector<uint8_t> pending_;      // [n_chunks] 1 when the chunk's last token is pending
  // Speculative decoding, per chunk: draft positions planned (their slots follow the chunk's tokens
  // in tokens_), the known token after the chunk (-1: none known yet) and, for drafting chunks, the
  // sequence's tokens up to the chunk's token.
  std::vector<int32_t> n_draft_;
  std::vector<int32_t> next_token_;
  std::vector<std::shared_ptr<const std::vector<std::byte>>> state_import_;  // [n_chunks], mostly null
  std::vector<std::shared_ptr<KvLayerSink>> layer_sinks_;                    // [n_chunks], mostly null
  struct LayerCall {  // a chunk's completed blocks, for its sink (run())
    KvLayerSink* sink = nullptr;
    int64_t first_block = 0;
    std::vector<int32_t> pool_ids;
  };
  std::vector<LayerCall> layer_calls_;
  std::vector<std::vector<int32_t>> context_;
  Drafter* drafter_ = nullptr;
  bool drafting_ = false;
  std::vector<DraftChunk> draft_chunks_;
  std::vector<size_t> draft_chunk_idx_;
  std::vector<ObservedChunk> observed_;
  // Sampled drafts: the drafter's q rows ([n_chunks] offsets into draft_probs_, -1 = greedy), and
  // the target's p row and the residual's scratch for the rule.
  std::vector<float> draft_probs_;
  std::vector<int64_t> draft_probs_begin_;
  std::vector<float> target_probs_;
  std::vector<float> residual_;
  std::vector<float> point_mass_;
  size_t sample_vocab_ = 0;
  std::vector<int32_t> observed_tokens_;
  std::vector<ForwardRequest> requests_;
  LogitsOutput out_;
  // Grammar rows only: their token masks (one per grammar job, in job order) and the masked copy of
  // the row being sampled (reused across jobs and steps); a verify row's mask after accepted drafts.
  std::vector<uint32_t> grammar_masks_;
  std::vector<float> masked_row_;
  std::vector<uint32_t> draft_row_mask_;
  // A penalised request's penalty state with the drafts accepted so far (verification only).
  PenaltyState draft_penalties_;

  Status propose_drafts();
  // Samples chunk i's rows from its token on, accepting drafts while they equal the samples (or, for
  // sampled drafts, while the rejection rule accepts them). Row j is sampled as a run without drafts
  // would sample that output position: masked by the grammar after drafts 0..j-1 (row 0's mask is
  // first_mask) and penalised with them counted. The matchers end where they began.
  void verify(const SampleJob& job, Sampler& sampler, size_t sample_vocab,
              std::span<const uint32_t> first_mask);
  // Verification of draft j (drafts[j] proposed for `row`): accepted, with the target's token.
  struct DraftCheck {
    bool accepted = false;
    SampleResult result;
  };
  DraftCheck check_draft(const SampleJob& job, Sampler& sampler, std::span<const float> row,
                         const PenaltyState& penalties, int32_t j);
  // The row masked to `mask` (in masked_row_), or an empty span when the mask allows no token.
  std::span<const float> masked(std::span<const float> row, std::span<const uint32_t> mask);
  Status observe_kept();
};

}  // namespace ds
