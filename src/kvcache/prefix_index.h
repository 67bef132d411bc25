// PrefixIndex: the two-way map between prefix hashes (kvcache/prefix_hash.h) and the blocks that hold
// those prefixes' KV. hash -> block answers "is this prefix cached, and where"; block -> hash lets
// the cache manager drop a block's entry in O(1) when the block is evicted (reallocated).
//
// At most one block per hash: when two sequences compute the same block concurrently, the first to
// commit registers it and the other keeps its copy unregistered (freed normally when it finishes).
// Pure bookkeeping; ref counts and the free list live in BlockPool.
//
// Not thread-safe: owned and driven by the scheduler thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvcache/block_pool.h"

namespace ds {

class PrefixIndex {
 public:
  // Blocks 0..n_blocks-1 may be registered.
  explicit PrefixIndex(int32_t n_blocks);

  // The block registered under `block_hash`, or -1.
  BlockId find(uint64_t block_hash) const;

  // Registers `block_id` under `block_hash`. False (and no change) when the hash already names a
  // block. Precondition: block_id is not registered.
  bool insert(uint64_t block_hash, BlockId block_id);

  // Forgets the block's hash; no-op when the block is not registered. O(1).
  void erase_block(BlockId block_id);

  bool is_registered(BlockId block_id) const;
  // Precondition: is_registered(block_id).
  uint64_t hash_of(BlockId block_id) const;
  int32_t n_registered() const { return static_cast<int32_t>(block_by_hash_.size()); }

  // Both directions agree and every block id is in range. O(n_blocks). Returns `internal` on a bug.
  Status check_integrity() const;

 private:
  friend struct PrefixIndexTestAccess;  // lets tests corrupt state to prove check_integrity() fails

  std::unordered_map<uint64_t, BlockId> block_by_hash_;
  std::vector<uint64_t> hash_by_block_;  // valid where registered_[block]
  std::vector<bool> registered_;
};

}  // namespace ds
