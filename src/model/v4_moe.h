// V4 MoE (model-spec §4.8): scores sqrt(softplus(gate·x)); the first num_hash_layers layers pick
// experts by tid2eid[token], the others by top-k of score + bias (the bias only selects; the
// weights are the unbiased scores, renormalised, × routed_scaling_factor). Experts are SwiGLU with
// swiglu_limit clamping (routed always; the shared one per V4Numerics), routed ones usually FP4.
// V4.1 (model-spec §5.8): the router logits are divided by gate_temp, the weights normalised as
// w / (Σw + 1e-20), and `gate.bias_vl` (image-span tokens' bias) is loaded and checked but unused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/moe_dispatch.h"
#include "model/routed_expert_set.h"
#include "model/v4_numerics.h"
#include "model/v4_scratch.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct V4Expert {
  Linear w1, w2, w3;  // gate [width, hidden], down [hidden, width], up [width, hidden]
  int64_t width = 0;
};

class V4Moe final : public RoutedExpertSet {
 public:
  // `<prefix>` = "layers.N.ffn." / "mtp.K.ffn."; hash routing when `hash_layer`. With `ep`, only
  // the routed experts it owns are loaded.
  static Result<V4Moe> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                            int32_t layer, bool hash_layer, const ExpertExchange* ep = nullptr);

  // x: [n, hidden] normed FFN input, tokens [n] (hash routing) -> out [n, hidden]. x and out
  // must not be in the MoE's scratch fields. The routed rows go through moe_dispatch.h; under
  // expert parallelism every rank calls this at every layer, with n == 0 when idle.
  void forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
               const int32_t* tokens, float* out, V4Scratch& scratch) const;

  // RoutedExpertSet (live EPLB).
  int32_t layer_id() const override { return layer_; }
  int64_t n_routed_experts() const override { return n_experts_; }
  bool holds_expert(int32_t expert) const override;
  void append_expert_bytes(int32_t expert, std::vector<std::byte>& out) const override;
  Status load_expert_bytes(int32_t expert, std::span<const std::byte> bytes) override;
  void drop_expert(int32_t expert) override;

 private:
  // One expert over m rows: y [m, hidden] = w2 · round(silu(g)·u · weight) for x [m, hidden]
  // (weights [m], or nullptr for the unweighted shared expert).
  struct ExpertJob {
    const V4Expert* e = nullptr;
    const float* x = nullptr;
    int64_t m = 0;
    const float* weights = nullptr;
    bool clamp = false;
    float* y = nullptr;
  };
  // Runs every job with two pool dispatches in all (gate + up + activation, then down), each
  // split into (expert, 64-column range) tasks, instead of three per expert: in decode each expert
  // has one row and its matmuls are too small to be worth a dispatch of their own. Each column is
  // computed by matmul_cols, which gives the same bits as linear() whatever the range.
  void run_experts(const ForwardContext& ctx, const V4Numerics& num, const std::vector<ExpertJob>& jobs,
                   V4Scratch& scratch) const;
  // One row's routing: chosen [top_k] expert ids and their weights [top_k].
  void route(const float* logits, int32_t token, int32_t* chosen, float* weights) const;

  int64_t hidden_ = 0, n_experts_ = 0, top_k_ = 0;
  int64_t expert_width_ = 0;  // moe_intermediate_size
  int32_t layer_ = 0;         // the model layer (MTP layers follow the main ones)
  bool hash_ = false, norm_topk_ = true;
  std::string score_func_;
  float route_scale_ = 1, limit_ = 0;
  float gate_temp_ = 1;        // router logits / gate_temp (V4.1; 1 in V4)
  float weight_norm_eps_ = 0;  // w / (Σw + eps): V4 0, V4.1 1e-20
  Linear gate_;
  std::vector<float> bias_;
  std::vector<float> bias_vl_;     // V4.1: the bias of image-span tokens (no vision yet: unused)
  std::vector<int32_t> tid2eid_;   // [vocab, top_k]
  std::vector<V4Expert> experts_;  // [n_experts]; those another rank owns are left empty
  std::vector<V4Expert> shared_;   // 0 or 1
};

}  // namespace ds
