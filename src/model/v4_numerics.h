// Run-time numerics switches of the DeepSeek-V4 forward that the checkpoint does not fix; each
// mirrors a switch of the numpy reference (tests/reference/README.md "V4", V4Numerics) so the
// engine can be compared with it mode for mode. docs/numerics.md "V4 numerics options" lists
// them, their defaults and why; parse_v4_numerics (v4_numerics_options.h) reads them from text.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace ds {

// The spec's bf16 rounding points, one bit each (names as in the reference's BF16_POINTS).
enum class Bf16Point : uint8_t {
  sub_norm,       // attn_norm / ffn_norm outputs (the sublayer input x̂)
  q_norm,         // q_norm output (query latent q_r, also the indexer's query input)
  kv_norm,        // kv_norm output (window KV before RoPE and the FP8 simulation)
  comp_norm,      // compressor norms (compressed KV and indexer keys)
  final_norm,     // the final norm (main and MTP) feeding the head
  mtp_norm,       // MTP enorm / hnorm
  mhc_collapse,   // mHC Σ pre_k·X_k
  mhc_expand,     // mHC post·f + Cᵀ·X (the stream state)
  head_collapse,  // hyper-head collapse before the final norm
  attn_probs,     // attention probabilities exp(s − m) before ·V
  expert_h,       // expert hidden h before W2
  index_w,        // indexer head weights W_w·x̂
  mtp_h0,         // MTP H₀
  count,
};

constexpr uint32_t bf16_point_bit(Bf16Point p) { return 1u << static_cast<unsigned>(p); }
constexpr uint32_t kAllBf16Points = (1u << static_cast<unsigned>(Bf16Point::count)) - 1;

struct V4Numerics {
  // The bf16 rounding points in use (Bf16Point bits). None = the reference's --no-bf16: used to
  // compare the engine's logic at an f32-noise bound, since with them on one f32-level difference
  // can flip a bf16 rounding and move a logit by ~1e-2 (README "expect bf16 rounding flips").
  uint32_t bf16_points = kAllBf16Points;
  // FP8 simulation of the non-RoPE window/compressed KV channels (reference kv_sim fp8 / none).
  bool kv_fp8_sim = true;
  // The shared expert clamps with swiglu_limit too (reference shared_expert_clamp on).
  bool shared_expert_clamp = true;
  // Per-head RMS normalisation of the queries (model-spec §4.3): -1 = the model's (V4 on, V4.1
  // off, §5.2 [?]: one port disagrees, so it stays switchable), 0 = off, 1 = on.
  int8_t q_head_norm = -1;
  // V4.1 index-key publishing (model-spec §9; `index_keys=every_step|on_group`): false = every KV
  // source's own keys are what its index sources score, every step (decode equals prefill); true =
  // the release's reference: one published key set per sequence, replaced by a KV source only on a
  // step where its compressor completed a group, so in decode a ratio-2 source's index layers score
  // (on the other steps) the keys the last publisher left (docs/models.md).
  bool index_keys_on_group = false;

  bool rounds(Bf16Point p) const { return (bf16_points & bf16_point_bit(p)) != 0; }
  float round(Bf16Point p, float v) const { return rounds(p) ? round_to_bf16(v) : v; }
  // A double result rounded once (to bf16, or to f32 when the point is off).
  float round(Bf16Point p, double v) const { return rounds(p) ? round_to_bf16(v) : static_cast<float>(v); }
  void round_inplace(Bf16Point p, float* v, int64_t n) const {
    if (!rounds(p)) return;
    for (int64_t i = 0; i < n; ++i) v[i] = round_to_bf16(v[i]);
  }
};

}  // namespace ds
