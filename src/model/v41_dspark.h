// DeepSeek-V4.1's DSpark drafter (docs/dspark.md; model-spec §5.9): the stages `mtp.0..S-1`, each a
// window-only V4.1 block whose attention also reads context keys injected from the target's
// features, run over a draft block [anchor, noise × (B−1)] with the rows seeing each other; the
// last stage's final norm, the Markov logit-bias head and the confidence head. The shared head
// (the target's) turns the stages' output rows into base logits; the caller owns it.
//
// Per-sequence state: one window ring of context keys per stage (V4SequenceSlot::dspark_layers),
// fed by inject() with the features the target forward computed (context_features()).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/embedding.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_block.h"
#include "model/v4_kv_state.h"
#include "model/v4_mhc.h"
#include "model/v4_numerics.h"
#include "model/v4_scratch.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class V41DSpark {
 public:
  // Preconditions: c.is_v41(), c.dspark, c.num_draft_layers() >= 1; stage_specs: the draft layer
  // slots' roles (num_hidden_layers + k, window-only).
  static Result<V41DSpark> load(const Checkpoint& ckpt, const ModelConfig& c,
                                std::span<const LayerSpec> stage_specs);

  int block_size() const { return block_size_; }
  int32_t noise_token() const { return noise_token_; }
  int n_stages() const { return static_cast<int>(stages_.size()); }
  int64_t markov_rank() const { return markov_rank_; }
  // The main layers whose input streams feed the features, in concatenation order.
  const std::vector<int>& target_layers() const { return target_layers_; }

  // f: [n, |T|·hidden] the concatenated stream means; c: [n, hidden] = RMSNorm(main_proj · f).
  void context_features(const ForwardContext& ctx, const V4Numerics& num, const float* f, int64_t n,
                        float* c) const;
  // rings: one per stage, sized by reset_rings. Writes the context keys of c [n, hidden] at pos.
  void inject(const ForwardContext& ctx, const V4Numerics& num, const float* c, int64_t n, const int32_t* pos,
              std::vector<V4LayerState>& rings, V4Scratch& scratch) const;
  void reset_rings(std::vector<V4LayerState>& rings) const;

  // Runs the stages over n_blocks draft blocks of block_size() rows each: streams [rows, hc, hidden]
  // (every row's streams = its input embedding), pos and ids [rows]; rings[b]: block b's stage
  // rings (read only). carried: [rows, hc] scratch for the delayed pre. h: [rows, hidden] the
  // final normed rows (the head's input).
  void forward(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n_blocks,
               const int32_t* pos, const int32_t* ids, std::span<std::vector<V4LayerState>* const> rings,
               double* carried, float* h, V4Scratch& scratch) const;

  // logits [vocab] += markov_head.head · markov_head.embed[prev].
  void add_markov_bias(const ForwardContext& ctx, int32_t prev, float* logits) const;
  // σ(w · [h ; markov_head.embed[prev]] + b) for one final row h [hidden].
  float confidence(const float* h, int32_t prev) const;

 private:
  MhcDims dims_;
  double eps_ = 0;
  int block_size_ = 0;
  int32_t noise_token_ = 0;
  int64_t markov_rank_ = 0, vocab_ = 0;
  int32_t window_ = 0;
  int64_t head_dim_ = 0;
  std::vector<int> target_layers_;
  std::vector<V4Block> stages_;
  Linear main_proj_;
  std::vector<float> main_norm_, norm_;
  Embedding markov_embed_;     // [vocab, rank]
  Linear markov_head_;         // [vocab, rank]
  std::vector<float> conf_w_;  // [hidden + rank]
  float conf_b_ = 0;
  // Scratch of the heads (one thread at a time, as every model call): embed[prev], the bias row.
  mutable std::vector<float> prev_embed_, bias_;
  // prev_embed_ = markov_head.embed[prev].
  void lookup_prev(int32_t prev) const;
};

}  // namespace ds
