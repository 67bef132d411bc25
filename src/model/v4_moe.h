// V4 MoE (model-spec §4.8): scores sqrt(softplus(gate·x)); the first num_hash_layers layers pick
// experts by tid2eid[token], the others by top-k of score + bias (the bias only selects; the
// weights are the unbiased scores, renormalised, × routed_scaling_factor). Experts are SwiGLU with
// swiglu_limit clamping (routed always; the shared one per V4Numerics), routed ones usually FP4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_numerics.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct V4Expert {
  Linear w1, w2, w3;  // gate [width, hidden], down [hidden, width], up [width, hidden]
  int64_t width = 0;
};

class V4Moe {
 public:
  // `<prefix>` = "layers.N.ffn." / "mtp.K.ffn."; hash routing when `hash_layer`.
  static Result<V4Moe> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                            bool hash_layer);

  // x: [n, hidden] normed FFN input, tokens [n] (hash routing) -> out [n, hidden].
  void forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
               const int32_t* tokens, float* out) const;

 private:
  // y [m, hidden] = w2 · round(silu(g)·u · weight) for m rows x [m, hidden] (weights [m], or
  // nullptr for the unweighted shared expert).
  void expert(const ForwardContext& ctx, const V4Numerics& num, const V4Expert& e, const float* x, int64_t m,
              const float* weights, bool clamp, float* y) const;
  // One row's routing: chosen [top_k] expert ids and their weights [top_k].
  void route(const float* logits, int32_t token, int32_t* chosen, float* weights) const;

  int64_t hidden_ = 0, n_experts_ = 0, top_k_ = 0;
  bool hash_ = false, norm_topk_ = true;
  std::string score_func_;
  float route_scale_ = 1, limit_ = 0;
  Linear gate_;
  std::vector<float> bias_;
  std::vector<int32_t> tid2eid_;  // [vocab, top_k]
  std::vector<V4Expert> experts_;
  std::vector<V4Expert> shared_;  // 0 or 1
};

}  // namespace ds
