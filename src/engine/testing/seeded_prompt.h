// A prompt of n pseudo-random token ids (< 120000, inside the DeepSeek-V3 vocabulary) from a salt:
// the same ids for the same (n, salt) on every host, different salts share no prefix. For engine
// tests on generated tiny checkpoints.
#pragma once

#include <cstdint>
#include <vector>

namespace ds::testing {

inline std::vector<int32_t> seeded_prompt(int32_t n, uint32_t salt) {
  std::vector<int32_t> p;
  uint32_t x = salt * 2654435761u + 1;
  for (int32_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p.push_back(static_cast<int32_t>(x % 120000u));
  }
  return p;
}

}  // namespace ds::testing
