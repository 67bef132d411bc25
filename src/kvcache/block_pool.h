// BlockPool: reference-counted allocator of fixed-size KV blocks, identified by index.
// Pure bookkeeping (no bytes): the engine keeps one pool per cache kind (MLA latents, indexer keys,
// window rings, ...) and maps a BlockId to storage elsewhere, so this stays testable without tensors.
//
// Free list order is FIFO: a released block goes to the back and allocate() takes from the front.
// A released block may still hold a prefix that the prefix index can hand out again; FIFO makes it
// the last to be overwritten, i.e. eviction in least-recently-released order (as vLLM's free queue).
// LIFO's cache-warmth advantage does not apply: blocks are large and live in separate storage.
//
// The free list is intrusive and doubly linked (prev/next arrays indexed by BlockId), so a free block
// that the prefix index still names can be taken back out of the middle of the list in O(1) by
// revive() when a later request matches it.
//
// Not thread-safe: owned and driven by the scheduler thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ds {

using BlockId = int32_t;

class BlockPool {
 public:
  // n_blocks: capacity of this cache kind; blocks are 0..n_blocks-1, all free at start (in id order).
  explicit BlockPool(int32_t n_blocks);

  // Takes the oldest free block and gives it ref count 1.
  // kvcache_out_of_blocks (retryable) when none is free: the scheduler preempts or waits.
  Result<BlockId> allocate();

  // Takes `block_id`, which must be free, off the free list wherever it sits and gives it ref count 1.
  // Used when a cached-but-unreferenced block is matched again. O(1).
  void revive(BlockId block_id);

  // Another owner (a request sharing a cached prefix) holds `block_id`. Call only on a block in use.
  void add_ref(BlockId block_id);

  // Drops one reference; at zero the block returns to the back of the free list.
  // Call only on a block in use (a release of a free block is a double free: a bug).
  void release(BlockId block_id);

  int32_t n_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t n_free() const { return n_free_; }
  int32_t ref_count(BlockId block_id) const;

  // The block allocate() would hand out next (-1 when none is free): the next eviction victim.
  BlockId next_free() const;

  // Free blocks from the front (next to allocate) to the back (most recently released). O(n_free).
  std::vector<BlockId> free_list() const;

  // Full consistency check, O(n_blocks): for tests and debug builds after every scheduler step.
  // Returns `internal` (a bug) describing the first violation found.
  Status check_integrity() const;

 private:
  friend struct BlockPoolTestAccess;  // lets tests corrupt state to prove check_integrity() fails

  void unlink(BlockId block_id);
  void push_back(BlockId block_id);
  int32_t sentinel() const { return n_blocks(); }

  std::vector<int32_t> ref_counts_;  // per block; 0 exactly when the block sits on the free list
  // Free list links: index n_blocks is the sentinel (its next is the front, its prev the back).
  // Entries of blocks in use are -1.
  std::vector<int32_t> next_;
  std::vector<int32_t> prev_;
  int32_t n_free_ = 0;
};

}  // namespace ds
