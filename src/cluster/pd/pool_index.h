// The decode server's view of its own pool: the chain hashes of the blocks it caches, kept from the
// engine's KV events (EngineConfig::kv_event_sink). A transfer asks the prefill server only for the
// blocks after the longest cached prefix. A view, not a promise: a block evicted before the request
// is admitted is computed by the decode server itself (slower, never wrong).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_set>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace ds::pd {

class PoolIndex {
 public:
  void apply(const std::vector<KvCacheEvent>& events);
  // Leading keys of `keys` the pool holds.
  int64_t count_prefix(std::span<const uint64_t> keys) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_set<uint64_t> blocks_;
};

}  // namespace ds::pd
