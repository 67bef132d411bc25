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
  none,  // no speculation
  mtp,   // the checkpoint's MTP layer, reused autoregressively (V3)
};

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::none;
  int32_t num_speculative_tokens = 0;  // k drafts per decode step, 1..kMaxSpeculativeTokens

  static constexpr int32_t kMaxSpeculativeTokens = 16;
  bool enabled() const { return method != SpeculativeMethod::none && num_speculative_tokens > 0; }
};

// invalid_argument (user) with one line naming the field: not JSON, not an object, an unknown key,
// method not "mtp" (dspark is named as not built yet), num_speculative_tokens missing or outside
// [1, kMaxSpeculativeTokens].
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

}  // namespace ds
