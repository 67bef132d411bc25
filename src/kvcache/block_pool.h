// BlockPool: reference-counted allocator of fixed-size KV blocks, identified by index.
// Pure bookkeeping (no bytes): the engine keeps one pool per cache kind (MLA latents, indexer keys,
// window rings, ...) and maps a BlockId to storage elsewhere, so this stays testable without tensors.
//
// Free list order is FIFO: a released block goes to the back and allocate() takes from the front.
// A released block may still hold a prefix that the prefix index can hand out again; FIFO makes it
// the last to be overwritten, i.e. eviction in least-recently-released order (as vLLM's free queue).
// LIFO's cache-warmth advantage does not apply: blocks are large and live in separate storage.
//
// Not thread-safe: owned and driven by the scheduler thread.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "base/status.h"

namespace ds {

using BlockId = int32_t;

class BlockPool {
 public:
  // n_blocks: capacity of this cache kind; blocks are 0..n_blocks-1, all free at start.
  explicit BlockPool(int32_t n_blocks);

  // Takes the oldest free block and gives it ref count 1.
  // kvcache_out_of_blocks (retryable) when none is free: the scheduler preempts or waits.
  Result<BlockId> allocate();

  // Another owner (a request sharing a cached prefix) holds `block_id`. Call only on a block in use.
  void add_ref(BlockId block_id);

  // Drops one reference; at zero the block returns to the back of the free list.
  // Call only on a block in use (a release of a free block is a double free: a bug).
  void release(BlockId block_id);

  int32_t n_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_fifo_.size()); }
  int32_t ref_count(BlockId block_id) const;

  // Full consistency check, O(n_blocks): for tests and debug builds after every scheduler step.
  // Returns `internal` (a bug) describing the first violation found.
  Status check_integrity() const;

 private:
  friend struct BlockPoolTestAccess;  // lets tests corrupt state to prove check_integrity() fails

  std::vector<int32_t> ref_counts_;  // per block; 0 exactly when the block sits in free_fifo_
  std::deque<BlockId> free_fifo_;    // front = next to allocate
};

}  // namespace ds
