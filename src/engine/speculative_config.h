// SpeculativeConfig: whether and how the engine drafts and verifies tokens (docs/speculative.md),
// parsed from vLLM's `--speculative-config` JSON shape:
//   {"method": "mtp", "num_speculative_tokens": 3}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ds {

enum class SpeculativeMethod : uint8_t {
  none,    // no speculation
  mtp,     // the checkpoint's MTP layer, reused autoregressively (V3)
  dspark,  // the checkpoint's DSpark stages, one parallel draft block per step (V4.1; docs/dspark.md)
};

// How the drafts of a sampled request (temperature > 0) are drawn (docs/speculative.md).
enum class DraftSampling : uint8_t {
  greedy,   // argmax drafts, accepted while equal to the request's own keyed sample: the output is
            // bit-identical to a run without speculation (the default)
  sampled,  // drafts drawn from the drafter's distribution q (the request's temperature, top-k/p,
            // min-p), accepted with min(1, p/q), resampled from norm(max(0, p - q)): the same
            // distribution, more accepted drafts, but not the non-speculative run's tokens
};

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::none;
  int32_t num_speculative_tokens = 0;  // k drafts per decode step, 1..kMaxSpeculativeTokens
  // Drafts per step chosen by SpeculationPolicy (0..k, from a cost curve measured at start and the
  // measured acceptance); false: always k.
  bool adaptive = true;
  DraftSampling draft_sampling = DraftSampling::greedy;
  // The MTP head's draft vocabulary (ModelRunner::set_mtp_draft_vocab): the draft_vocab lowest token
  // ids (BPE merge order, roughly frequency rank) plus the special tokens. -1 = auto (a quarter of
  // the vocabulary, at least 1024); 0 = the full head.
  int32_t draft_vocab = -1;
  // DSpark: confidence-scheduled verification (DSpark paper Algorithm 1; DeepInfer's
  // DEEPINFER_ENABLE_MTP_VARLEN): each step verifies, per sequence, the prefix of its drafts that
  // maximises expected tokens per second under the target's step-time curve measured at start.
  bool confidence_scheduling = false;
  // With confidence_scheduling: DeepInfer's production variant (paper §5.2, for async scheduling):
  // the step's draft capacity comes from the confidences of two steps back and the step verifies its
  // most likely drafts up to it ("confidence_capacity": "two_steps_back"); false: Algorithm 1 on
  // the step's own confidences ("fresh").
  bool confidence_delayed = false;

  static constexpr int32_t kMaxSpeculativeTokens = 16;
  bool enabled() const { return method != SpeculativeMethod::none && num_speculative_tokens > 0; }
};

// Keys: method, num_speculative_tokens (required), adaptive (bool, default true), draft_sampling
// ("greedy" | "sampled", default greedy), draft_vocab (integer >= 0; default auto),
// confidence_scheduling (bool, default false; only with method dspark), confidence_capacity
// ("fresh" | "two_steps_back", default fresh; only with confidence_scheduling).
// invalid_argument (user) with one line naming the field: not JSON, not an object, an unknown key,
// method not "mtp" or "dspark", num_speculative_tokens missing or outside
// [1, kMaxSpeculativeTokens], adaptive not a bool, draft_sampling not one of its values.
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

}  // namespace ds
