#include "engine/outside_kv_blocks.h"

#include <fmt/format.h>

#include <algorithm>

namespace ds {

Result<std::vector<BlockId>> OutsideKvBlocks::reserve(KvCacheManager& kv, int32_t n, int32_t max_lent) {
  if (n > max_lent - n_lent())
    return Status(ErrorCode::kvcache_out_of_blocks,
                  fmt::format("{} KV blocks asked for an outside writer, {} lent already, at most {} may be",
                              n, n_lent(), max_lent));
  std::optional<std::vector<BlockId>> blocks = kv.reserve_fresh(n);
  if (!blocks)
    return Status(ErrorCode::kvcache_out_of_blocks,
                  fmt::format("{} KV blocks asked for an outside writer, {} free", n, kv.n_free_blocks()));
  lent_.insert(blocks->begin(), blocks->end());
  return std::move(*blocks);
}

Result<int32_t> OutsideKvBlocks::adopt(KvCacheManager& kv, std::span<const BlockId> blocks,
                                       std::span<const TokenId> tokens, std::string_view cache_salt,
                                       int64_t first_block) {
  for (BlockId b : blocks)
    if (!lent_.contains(b))
      return Status(ErrorCode::engine_bad_request, fmt::format("KV block {} is not lent out", b));
  const int64_t bs = kv.block_size_tokens();
  if (first_block < 0 || static_cast<int64_t>(tokens.size()) < (first_block + std::ssize(blocks)) * bs)
    return Status(ErrorCode::engine_bad_request,
                  fmt::format("{} tokens do not cover blocks [{}, {})", tokens.size(), first_block,
                              first_block + std::ssize(blocks)));
  return kv.adopt(blocks, tokens, cache_salt, first_block);
}

void OutsideKvBlocks::unpin(KvCacheManager& kv, BlockId block) {
  if (lent_.erase(block) == 0) return;  // not lent (or already given back): never unpinned twice
  kv.unpin(block);
}

void OutsideKvBlocks::release(KvCacheManager& kv, std::span<const BlockId> blocks,
                              std::optional<SteadyTime> not_before) {
  if (not_before) {
    held_.push_back({std::vector<BlockId>(blocks.begin(), blocks.end()), *not_before});
    return;
  }
  for (BlockId b : blocks) unpin(kv, b);
}

void OutsideKvBlocks::expire(KvCacheManager& kv, SteadyTime now) {
  std::erase_if(held_, [&](const Held& h) {
    if (h.not_before > now) return false;
    for (BlockId b : h.blocks) unpin(kv, b);
    return true;
  });
}

std::optional<OutsideKvBlocks::SteadyTime> OutsideKvBlocks::next_expiry() const {
  std::optional<SteadyTime> next;
  for (const Held& h : held_)
    if (!next || h.not_before < *next) next = h.not_before;
  return next;
}

}  // namespace ds
