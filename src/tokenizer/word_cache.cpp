#include "tokenizer/word_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace ds {

WordCache::WordCache(size_t n_slots)
    : entries_(new Entry[std::bit_ceil(std::max<size_t>(n_slots, kNumStripes))]),
      mask_(std::bit_ceil(std::max<size_t>(n_slots, kNumStripes)) - 1),
      stripes_(std::make_unique<std::array<std::mutex, kNumStripes>>()) {}

uint64_t WordCache::hash_word(std::string_view word) {
  // FNV-1a then a final mix: words are short, so a simple byte loop is as fast as anything.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : word) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 32;
  return h;
}

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  const uint64_t h = hash_word(word);
  const size_t slot = h & mask_;
  std::lock_guard lock((*stripes_)[slot % kNumStripes]);
  const Entry& e = entries_[slot];
  if (e.n_ids == 0 || e.hash != h || e.word_len != word.size() ||
      std::memcmp(e.word, word.data(), word.size()) != 0) {
    return false;
  }
  out.insert(out.end(), e.ids, e.ids + e.n_ids);
  return true;
}

void WordCache::store(std::string_view word, std::span<const int32_t> ids) const {
  if (word.size() > kMaxWordBytes || ids.empty() || ids.size() > kMaxIds) return;
  const uint64_t h = hash_word(word);
  const size_t slot = h & mask_;
  std::lock_guard lock((*stripes_)[slot % kNumStripes]);
  Entry& e = entries_[slot];
  e.hash = h;
  e.word_len = static_cast<uint8_t>(word.size());
  e.n_ids = static_cast<uint8_t>(ids.size());
  std::memcpy(e.word, word.data(), word.size());
  std::memcpy(e.ids, ids.data(), ids.size() * sizeof(int32_t));
}

}  // namespace ds
