// Mixture of experts FFN (V3): router over n_routed experts, top-k experts per row plus the
// shared experts. The routed rows go through moe_dispatch.h (grouped per expert, so each expert's
// weights are streamed once per forward whatever the batch; or sent to their expert's rank).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/dense_mlp.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/moe_dispatch.h"
#include "model/moe_router.h"
#include "model/routed_expert_set.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct MoeScratch {
  TensorF32 gate_logits;            // [n_rows, n_experts]
  std::vector<int32_t> expert_idx;  // [n_rows, top_k]
  std::vector<float> expert_w;      // [n_rows, top_k]
  std::vector<float> y_choice;      // [n_rows · top_k, hidden] each choice's expert output
  MoeDispatchScratch dispatch;
  MlpScratch mlp;
  RouterScratch router;
};

class Moe final : public RoutedExpertSet {
 public:
  // prefix = "model.layers.N.mlp", layer = N. With `ep`, only the experts it owns are loaded.
  static Result<Moe> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& cfg,
                          int block, int32_t layer, const ExpertExchange* ep = nullptr);

  const RouterConfig& router() const { return router_; }

  // x: [n_rows, hidden]; out: [n_rows, hidden] = shared(x) + Σ_k w_k · expert_k(x), the routed
  // terms added in ascending expert id for every row (a fixed order, whatever the batch). Under
  // expert parallelism every rank calls it at every layer, with n_rows == 0 when idle.
  void forward(const ForwardContext& ctx, const float* x, int64_t n_rows, MoeScratch& s, float* out) const;

  // RoutedExpertSet (live EPLB).
  int32_t layer_id() const override { return layer_; }
  int64_t n_routed_experts() const override { return static_cast<int64_t>(experts_.size()); }
  bool holds_expert(int32_t expert) const override;
  void append_expert_bytes(int32_t expert, std::vector<std::byte>& out) const override;
  Status load_expert_bytes(int32_t expert, std::span<const std::byte> bytes) override;
  void drop_expert(int32_t expert) override;

 private:
  int64_t hidden_ = 0;
  int64_t expert_width_ = 0;  // moe_intermediate_size
  int32_t layer_ = 0;         // the model layer N
  RouterConfig router_;
  Linear gate_;                    // [n_experts, hidden]
  std::vector<float> bias_;        // e_score_correction_bias [n_experts]; empty when absent
  std::vector<DenseMlp> experts_;  // [n_experts]; those another rank owns are left empty
  std::optional<DenseMlp> shared_;
};

}  // namespace ds
