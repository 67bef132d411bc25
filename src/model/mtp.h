// Multi-token prediction layer (V3 layer index num_hidden_layers): from the main model's hidden
// state at position i and token i+1, predicts token i+2:
//   z = eh_proj · [enorm(embed(t_{i+1})) ; hnorm(h_i)], one full decoder block at position i with
//   its own cache, then shared_head.norm and shared_head.head.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/decoder_layer.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct MtpScratch {
  TensorF32 cat;     // [n_rows, 2·hidden]: [enorm(e) | hnorm(h)]
  TensorF32 x;       // [n_rows, hidden] residual stream of the MTP block
  TensorF32 normed;  // [n_rows, hidden]
};

class MtpLayer {
 public:
  // The layer's own embed_tokens / shared_head.head are used when present, else the main
  // model's (`main_embed`, `main_head`, which must outlive this layer).
  static Result<MtpLayer> load(const Checkpoint& ckpt, const ModelConfig& cfg, const MlaDims& dims, int block,
                               const Embedding& main_embed, const WeightMatrix& main_head);

  // next_tokens: [batch.n_rows]; hidden: [batch.n_rows, hidden]; logits: [batch.n_rows, vocab].
  void forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
               const std::vector<float>& inv_freq, const int32_t* next_tokens, const float* hidden,
               MtpScratch& s, LayerScratch& ls, float* logits) const;
  // The two halves of forward(), for callers that want logits of some rows only (drafting).
  // block(): s.x = the block's residual stream [batch.n_rows, hidden], its cache rows written.
  void block(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
             const std::vector<float>& inv_freq, const int32_t* next_tokens, const float* hidden,
             MtpScratch& s, LayerScratch& ls) const;
  // head(): rows x [n_rows, hidden] -> normed [n_rows, hidden] (shared_head.norm) and logits.
  void head(const ForwardContext& ctx, const float* x, int64_t n_rows, float* normed, float* logits) const;
  // The head restricted to token ids (ModelRunner::set_mtp_draft_vocab): a copy of those rows of
  // the head weight (BF16 or F32; model_unsupported for block-scaled FP8). Empty ids: none.
  Status set_draft_vocab(std::span<const int32_t> ids);
  int64_t draft_vocab_size() const { return draft_head_.rows; }
  // head() over the draft vocabulary: logits [n_rows, draft_vocab_size()].
  void draft_head(const ForwardContext& ctx, const float* x, int64_t n_rows, float* normed,
                  float* logits) const;

  // An expert-parallel idle MTP step: the block's MoE with no rows (ModelRunner::forward_mtp_idle).
  void moe_idle(const ForwardContext& ctx, LayerScratch& ls) const { block_->moe_idle(ctx, ls); }

 private:
  int64_t hidden_ = 0;
  int64_t vocab_ = 0;
  float eps_ = 1e-6f;
  Embedding embed_;
  std::vector<float> enorm_, hnorm_, head_norm_;
  Linear eh_proj_;  // [hidden, 2·hidden]
  std::optional<DecoderLayer> block_;
  std::optional<Linear> own_head_;
  WeightMatrix head_;  // own_head_->w or the main lm_head
  std::vector<uint8_t> draft_head_storage_;
  WeightMatrix draft_head_;  // rows of head_ for the draft vocabulary (rows = 0: none)
};

}  // namespace ds
