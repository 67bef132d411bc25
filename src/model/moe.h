// Mixture of experts FFN (V3): router over n_routed experts, top-k experts per row plus the
// shared experts. Rows are gathered per expert so each expert's matmuls run once for all its rows
// (each expert's weights are streamed once per forward, whatever the batch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/dense_mlp.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/moe_router.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct MoeScratch {
  TensorF32 gate_logits;            // [n_rows, n_experts]
  std::vector<int32_t> expert_idx;  // [n_rows, top_k]
  std::vector<float> expert_w;      // [n_rows, top_k]
  std::vector<int32_t> slot_begin;  // [n_experts + 1]: expert e owns slots [slot_begin[e], slot_begin[e+1])
  std::vector<int32_t> slot_row;    // [n_rows · top_k]: batch row of each slot, grouped by expert
  std::vector<float> slot_w;        // [n_rows · top_k]
  std::vector<int32_t> fill;        // [n_experts]
  TensorF32 xe;                     // [rows of one expert, hidden] gathered inputs
  TensorF32 ye;                     // [rows of one expert, hidden] expert outputs
  MlpScratch mlp;
  RouterScratch router;
};

class Moe {
 public:
  // prefix = "model.layers.N.mlp".
  static Result<Moe> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& cfg,
                          int block);

  const RouterConfig& router() const { return router_; }

  // x: [n_rows, hidden]; out: [n_rows, hidden] = shared(x) + Σ_k w_k · expert_k(x), the routed
  // terms added in ascending expert id for every row (a fixed order, whatever the batch).
  void forward(const ForwardContext& ctx, const float* x, int64_t n_rows, MoeScratch& s, float* out) const;

 private:
  int64_t hidden_ = 0;
  RouterConfig router_;
  Linear gate_;              // [n_experts, hidden]
  std::vector<float> bias_;  // e_score_correction_bias [n_experts]; empty when absent
  std::vector<DenseMlp> experts_;
  std::optional<DenseMlp> shared_;
};

}  // namespace ds
