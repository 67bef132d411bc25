// The V4 MTP layer (model-spec §4.10): H0_k = e_proj·enorm(embed(next token)) + h_proj·hnorm(X_k)
// per main final stream k, one V4 block with its own window ring, then the hyper-head and norm;
// the caller applies the shared head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/embedding.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_block.h"
#include "model/v4_mhc.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

class V4Mtp {
 public:
  // `mtp.<k>.*`; `spec`: its layer slot's role (num_hidden_layers + k).
  static Result<V4Mtp> load(const Checkpoint& ckpt, const ModelConfig& c, int k, const LayerSpec& spec);

  // main_streams: [n, hc, hidden] main final streams at positions pos[0..n) (or, drafting, the
  // layer's own output streams of the position before); next_tokens [n]; h_out: [n, hidden] normed
  // rows for the head; last_streams (may be null): [hc, hidden] the block's output streams of row
  // n - 1, the input of a draft row after it.
  void forward(const ForwardContext& ctx, const V4Numerics& num, const Embedding& embed,
               const float* main_streams, const int32_t* next_tokens, int64_t n, const int32_t* pos,
               V4LayerState& st, const V4LayerPages& pages, float* h_out, V4Scratch& scratch,
               float* last_streams = nullptr) const;

  // An expert-parallel idle MTP step: the block's MoE with no rows (ModelRunner::forward_mtp_idle).
  void ffn_idle(const ForwardContext& ctx, const V4Numerics& num, V4Scratch& scratch) const {
    block_.ffn_idle(ctx, num, scratch);
  }

 private:
  MhcDims dims_;
  double eps_ = 0;  // rms_norm_eps as configured (V4.1: 1e-20)
  Linear e_proj_, h_proj_;
  std::vector<float> enorm_, hnorm_, norm_;
  V4Block block_;
  MhcHead head_;
};

}  // namespace ds
