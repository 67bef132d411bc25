// CacheScopes: which (cache salt, prompt cache key) committed each cached pool block, kept from the
// pool's stored / removed events, so that the admin route (`DELETE /v1/cache`) can drop a tenant's
// prefixes by salt or by key prefix (docs/kvcache.md, Admin routes). Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace ds {

// Which cached prefixes to drop; no field = all of them; both = both must match.
struct CacheClearFilter {
  std::optional<std::string> salt;        // exactly this Request::cache_salt ("" = unsalted requests)
  std::optional<std::string> key_prefix;  // Request::cache_key starting with this
  bool matches(const std::string& salt_of_block, const std::string& key_of_block) const;
};

struct CacheClearResult {
  int32_t blocks_removed = 0;        // cached pool blocks no longer cached
  int32_t blocks_in_use = 0;         // matching blocks kept: running sequences or tier writes hold them
  int32_t pin_leases_released = 0;   // Request::cache_pin leases of matching requests ended first
  int64_t tier_entries_removed = 0;  // entries deleted from the KV tiers (SSD, Redis), any writer
};

class CacheScopes {
 public:
  // `scope_of(seq)` gives the (salt, key) of a committing sequence (nullopt: unknown, counted as
  // unsalted and unkeyed).
  void on_events(std::span<const KvCacheEvent> events,
                 const std::function<std::optional<std::pair<std::string, std::string>>(SeqId)>& scope_of);
  // Cached hashes whose scope matches.
  std::vector<uint64_t> matching(const CacheClearFilter& filter) const;
  size_t n_tracked() const { return scope_of_hash_.size(); }

 private:
  uint32_t intern(std::pair<std::string, std::string> scope);

  std::unordered_map<std::string, uint32_t> id_of_scope_;
  std::vector<std::pair<std::string, std::string>> scopes_;  // id -> (salt, key)
  std::unordered_map<uint64_t, uint32_t> scope_of_hash_;
};

}  // namespace ds
