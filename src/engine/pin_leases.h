// PinLeases: Request::cache_pin's leases (docs/kvcache.md, Cache control in the APIs). A lease pins
// a prompt's full blocks in the pool (each pin is a reference, so the pool never evicts them) until
// its expiry; the blocks all leases hold together are bounded by a quota, beyond which a request
// runs unpinned and is counted. Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace ds {

class PinLeases {
 public:
  explicit PinLeases(int32_t max_blocks) : max_blocks_(max_blocks) {}

  // Pins `blocks` until expires_at_unix_s. false, with nothing pinned (counted in n_refused), when
  // that would pass the quota.
  bool add(KvCacheManager& kv, std::vector<BlockId> blocks, int64_t expires_at_unix_s, std::string salt,
           std::string cache_key);
  // Unpins the leases whose expiry is at or before now.
  void expire(KvCacheManager& kv, int64_t now_unix_s);
  // Unpins the leases whose (salt, cache_key) match (admin deletion); returns how many.
  int32_t release_matching(KvCacheManager& kv,
                           const std::function<bool(const std::string& salt, const std::string& key)>& match);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_leases() const { return static_cast<int32_t>(leases_.size()); }
  int64_t n_refused() const { return n_refused_; }
  int32_t max_blocks() const { return max_blocks_; }

 private:
  struct Lease {
    std::vector<BlockId> blocks;
    int64_t expires_at_unix_s = 0;
    std::string salt;
    std::string cache_key;
  };
  void release(KvCacheManager& kv, const Lease& lease);

  int32_t max_blocks_;
  int32_t n_blocks_ = 0;
  int64_t n_refused_ = 0;
  std::vector<Lease> leases_;
};

}  // namespace ds
