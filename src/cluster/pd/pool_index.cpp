#include "cluster/pd/pool_index.h"

namespace ds::pd {

void PoolIndex::apply(const std::vector<KvCacheEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const KvCacheEvent& e : events) {
    switch (e.kind) {
      case KvCacheEvent::Kind::stored:
        blocks_.insert(e.block_hashes.begin(), e.block_hashes.end());
        break;
      case KvCacheEvent::Kind::removed:
        for (uint64_t h : e.block_hashes) blocks_.erase(h);
        break;
      case KvCacheEvent::Kind::all_cleared:
        blocks_.clear();
        break;
    }
  }
}

int64_t PoolIndex::count_prefix(std::span<const uint64_t> keys) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (uint64_t k : keys) {
    if (!blocks_.contains(k)) break;
    ++n;
  }
  return n;
}

size_t PoolIndex::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.size();
}

}  // namespace ds::pd
