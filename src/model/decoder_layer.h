// One transformer block of V3: x += attn(norm(x)); x += ffn(norm(x)), ffn dense or MoE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/batch_layout.h"
#include "model/dense_mlp.h"
#include "model/forward_context.h"
#include "model/mla_attention.h"
#include "model/model_options.h"
#include "model/moe.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

// Scratch shared by all layers of a model (one forward at a time).
struct LayerScratch {
  TensorF32 normed;  // [n_rows, hidden]
  TensorF32 branch;  // [n_rows, hidden] attention / FFN output before the residual add
  MlaScratch mla;
  MlpScratch mlp;
  MoeScratch moe;
};

class DecoderLayer {
 public:
  // Tensors under "model.layers.<layer_idx>."; MoE when cfg.is_moe_layer(layer_idx).
  static Result<DecoderLayer> load(const Checkpoint& ckpt, int layer_idx, const ModelConfig& cfg,
                                   const MlaDims& dims, int block, const ExpertExchange* ep = nullptr);

  bool is_moe() const { return moe_.has_value(); }
  Moe* moe() { return moe_ ? &*moe_ : nullptr; }  // live EPLB moves its routed experts
  // An expert-parallel idle step: the MoE (if any) with no rows (ModelRunner::forward_idle).
  void moe_idle(const ForwardContext& ctx, LayerScratch& s) const {
    if (moe_) moe_->forward(ctx, nullptr, 0, s.moe, nullptr);
  }

  // x: [batch.n_rows, hidden], updated in place (the residual stream).
  void forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
               const std::vector<float>& inv_freq, float* x, LayerScratch& s) const;

 private:
  int64_t hidden_ = 0;
  float eps_ = 1e-6f;
  std::vector<float> input_norm_;
  std::vector<float> post_attn_norm_;
  MlaAttention attn_;
  std::optional<DenseMlp> dense_;
  std::optional<Moe> moe_;
};

}  // namespace ds
