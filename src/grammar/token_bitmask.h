// Token masks: one bit per token id in uint32 words (bit i of word i / 32), 129,280 ids = 4,040 words =
// 16 KB, small enough to stay in L1/L2 while a mask is built and applied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ds::grammar {

constexpr size_t bitmask_words(size_t n_tokens) { return (n_tokens + 31) / 32; }

inline void bitmask_set(std::span<uint32_t> mask, int32_t id) {
  mask[static_cast<size_t>(id) >> 5] |= uint32_t{1} << (id & 31);
}
inline bool bitmask_test(std::span<const uint32_t> mask, int32_t id) {
  return (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1;
}
size_t bitmask_count(std::span<const uint32_t> mask);

// logits[i] = -inf for every i < logits.size() whose bit is clear (ids past the mask are cleared too).
void apply_bitmask(std::span<float> logits, std::span<const uint32_t> mask);

}  // namespace ds::grammar
