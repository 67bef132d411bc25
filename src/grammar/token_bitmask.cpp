#include "grammar/token_bitmask.h"

#include <bit>
#include <limits>

namespace ds::grammar {

size_t bitmask_count(std::span<const uint32_t> mask) {
  size_t n = 0;
  for (uint32_t w : mask) n += static_cast<size_t>(std::popcount(w));
  return n;
}

void apply_bitmask(std::span<float> logits, std::span<const uint32_t> mask) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = w < mask.size() ? mask[w] : 0;
    if (bits == 0xffffffffu) continue;
    const size_t end = w * 32 + 32 < n ? w * 32 + 32 : n;
    for (size_t i = w * 32; i < end; ++i)
      if (!((bits >> (i - w * 32)) & 1)) logits[i] = kNegInf;
  }
}

}  // namespace ds::grammar
