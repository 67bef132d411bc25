// OutsideKvBlocks: pool blocks lent to a writer outside the engine (P/D: a prefill server puts a
// prompt's KV pages straight into the decode server's pool, docs/pd.md). A reservation is fresh
// blocks held by pins (KvCacheManager::reserve_fresh), so nothing else is scheduled into them while
// they are written; once the bytes are there the blocks are adopted as a prompt's cached blocks
// (KvCacheManager::adopt) and a request with that prompt hits them like any prefix; a release
// drops the pins — at once, or not before a time (a writer whose transfer failed may still be
// putting until its deadline). Ids the engine did not lend are refused, never unpinned twice.
// Engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_cache_manager.h"

namespace ds {

class OutsideKvBlocks {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // kvcache_out_of_blocks (retryable) when fewer than n blocks are free, or when the blocks lent
  // out (held ones included) would pass max_lent.
  Result<std::vector<BlockId>> reserve(KvCacheManager& kv, int32_t n, int32_t max_lent);
  // Blocks [first_block, first_block + blocks.size()) of `tokens`: registered in the prefix index
  // (stored events). Returns how many were registered (a prefix already cached
  // stays with its first copy). engine_bad_request for a block not lent out or too few tokens.
  Result<int32_t> adopt(KvCacheManager& kv, std::span<const BlockId> blocks, std::span<const TokenId> tokens,
                        std::string_view cache_salt, int64_t first_block);
  // Unpins the lent blocks among `blocks` now, or at the first expire() at or after not_before.
  void release(KvCacheManager& kv, std::span<const BlockId> blocks, std::optional<SteadyTime> not_before);
  // Releases the held blocks whose time came.
  void expire(KvCacheManager& kv, SteadyTime now);
  // When the next held release is due (none: nothing held).
  std::optional<SteadyTime> next_expiry() const;

  // Blocks lent out, held ones included.
  int32_t n_lent() const { return static_cast<int32_t>(lent_.size()); }

 private:
  struct Held {
    std::vector<BlockId> blocks;
    SteadyTime not_before;
  };
  // A lent block is pinned, so it is never fresh for another reservation: each is lent once.
  std::unordered_set<BlockId> lent_;
  std::vector<Held> held_;
  void unpin(KvCacheManager& kv, BlockId block);
};

}  // namespace ds
