// Bounded cache of BPE results for short words (word bytes -> token ids). Natural text repeats
// its words, so most pre-tokenized pieces are answered here without running the merge loop.
//
// Direct-mapped and fixed-size: a new word evicts whatever shared its slot, so memory stays at
// n_slots * 64 bytes however much text passes through. Thread-safe: each slot is guarded by one of
// kNumStripes mutexes (slot % kNumStripes), so concurrent encoders rarely contend.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace ds {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 22;
  static constexpr size_t kMaxIds = 8;

  explicit WordCache(size_t n_slots = size_t{1} << 15);

  // Appends the cached ids of `word` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  // Remembers ids for `word`; words or results too long to fit a slot are not cached.
  void store(std::string_view word, std::span<const int32_t> ids) const;

 private:
  struct alignas(64) Entry {
    uint64_t hash = 0;
    uint8_t word_len = 0;
    uint8_t n_ids = 0;  // 0 = empty slot (a non-empty word has at least one id)
    char word[kMaxWordBytes] = {};
    int32_t ids[kMaxIds] = {};
  };
  static_assert(sizeof(Entry) == 64);
  static constexpr size_t kNumStripes = 64;

  static uint64_t hash_word(std::string_view word);

  // The cache is logically const: it never changes what encode() returns, only how fast.
  mutable std::unique_ptr<Entry[]> entries_;
  size_t mask_;
  mutable std::unique_ptr<std::array<std::mutex, kNumStripes>> stripes_;
};

}  // namespace ds
