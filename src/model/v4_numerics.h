// Run-time numerics switches of the DeepSeek-V4 forward that the checkpoint does not fix; each
// mirrors a switch of the numpy reference (tests/reference/README.md "V4", V4Numerics) so the
// engine can be compared with it mode for mode.
#pragma once

#include "tensor/dtype.h"

namespace ds {

struct V4Numerics {
  // The spec's bf16 rounding points (norm outputs, mHC collapse/expand, attention probabilities,
  // expert hidden, indexer head weights, MTP H0). Off = the reference's --no-bf16: used to compare
  // the engine's logic at an f32-noise bound, since with them on one f32-level difference can
  // flip a bf16 rounding and move a logit by ~1e-2 (README "expect bf16 rounding flips").
  bool bf16_rounding = true;
  // FP8 simulation of the non-RoPE window/compressed KV channels (reference kv_sim fp8 / none).
  bool kv_fp8_sim = true;
  // The shared expert clamps with swiglu_limit too (reference shared_expert_clamp on).
  bool shared_expert_clamp = true;

  float round(float v) const { return bf16_rounding ? round_to_bf16(v) : v; }
  void round_inplace(float* v, int64_t n) const {
    if (!bf16_rounding) return;
    for (int64_t i = 0; i < n; ++i) v[i] = round_to_bf16(v[i]);
  }
};

}  // namespace ds
