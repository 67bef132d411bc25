#include "engine/pin_leases.h"

#include <algorithm>
#include <utility>

namespace ds {

bool PinLeases::add(KvCacheManager& kv, std::vector<BlockId> blocks, int64_t expires_at_unix_s,
                    std::string salt, std::string cache_key) {
  if (blocks.empty()) return true;
  if (n_blocks_ + static_cast<int64_t>(blocks.size()) > max_blocks_) {
    ++n_refused_;
    return false;
  }
  for (const BlockId b : blocks) kv.pin(b);
  n_blocks_ += static_cast<int32_t>(blocks.size());
  leases_.push_back(Lease{std::move(blocks), expires_at_unix_s, std::move(salt), std::move(cache_key)});
  return true;
}

void PinLeases::release(KvCacheManager& kv, const Lease& lease) {
  for (const BlockId b : lease.blocks) kv.unpin(b);
  n_blocks_ -= static_cast<int32_t>(lease.blocks.size());
}

void PinLeases::expire(KvCacheManager& kv, int64_t now_unix_s) {
  std::erase_if(leases_, [&](const Lease& lease) {
    if (lease.expires_at_unix_s > now_unix_s) return false;
    release(kv, lease);
    return true;
  });
}

int32_t PinLeases::release_matching(
    KvCacheManager& kv, const std::function<bool(const std::string& salt, const std::string& key)>& match) {
  int32_t n = 0;
  std::erase_if(leases_, [&](const Lease& lease) {
    if (!match(lease.salt, lease.cache_key)) return false;
    release(kv, lease);
    ++n;
    return true;
  });
  return n;
}

}  // namespace ds
