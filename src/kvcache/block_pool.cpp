#include "kvcache/block_pool.h"

#include <fmt/format.h>

#include "base/assert.h"

namespace ds {

BlockPool::BlockPool(int32_t n_blocks) {
  DS_ASSERT(n_blocks >= 0, "BlockPool needs a non-negative block count");
  ref_counts_.assign(static_cast<size_t>(n_blocks), 0);
  for (BlockId block_id = 0; block_id < n_blocks; ++block_id) free_fifo_.push_back(block_id);
}

Result<BlockId> BlockPool::allocate() {
  if (free_fifo_.empty()) {
    return Status(ErrorCode::kvcache_out_of_blocks,
                  fmt::format("all {} KV blocks are in use", ref_counts_.size()));
  }
  const BlockId block_id = free_fifo_.front();
  free_fifo_.pop_front();
  DS_ASSERT(ref_counts_[static_cast<size_t>(block_id)] == 0, "block on the free list had references");
  ref_counts_[static_cast<size_t>(block_id)] = 1;
  return block_id;
}

void BlockPool::add_ref(BlockId block_id) {
  DS_ASSERT(block_id >= 0 && block_id < n_blocks(), "add_ref of a block id out of range");
  int32_t& refs = ref_counts_[static_cast<size_t>(block_id)];
  DS_ASSERT(refs > 0, "add_ref of a free block");
  ++refs;
}

void BlockPool::release(BlockId block_id) {
  DS_ASSERT(block_id >= 0 && block_id < n_blocks(), "release of a block id out of range");
  int32_t& refs = ref_counts_[static_cast<size_t>(block_id)];
  DS_ASSERT(refs > 0, "double free: release of a free block");
  if (--refs == 0) free_fifo_.push_back(block_id);
}

int32_t BlockPool::ref_count(BlockId block_id) const {
  DS_ASSERT(block_id >= 0 && block_id < n_blocks(), "ref_count of a block id out of range");
  return ref_counts_[static_cast<size_t>(block_id)];
}

Status BlockPool::check_integrity() const {
  std::vector<bool> on_free_list(ref_counts_.size(), false);
  for (const BlockId block_id : free_fifo_) {
    if (block_id < 0 || block_id >= n_blocks()) {
      return Status(ErrorCode::internal, fmt::format("free list holds out-of-range block {}", block_id));
    }
    const auto idx = static_cast<size_t>(block_id);
    if (on_free_list[idx]) {
      return Status(ErrorCode::internal, fmt::format("block {} is on the free list twice", block_id));
    }
    on_free_list[idx] = true;
    if (ref_counts_[idx] != 0) {
      return Status(ErrorCode::internal,
                    fmt::format("free block {} has ref count {}", block_id, ref_counts_[idx]));
    }
  }
  // Every block not on the free list must be in use; with the loop above this balances
  // n_free + n_in_use == n_blocks.
  for (size_t idx = 0; idx < ref_counts_.size(); ++idx) {
    if (!on_free_list[idx] && ref_counts_[idx] <= 0) {
      return Status(ErrorCode::internal, fmt::format("block {} is neither free nor referenced (ref count {})",
                                                     idx, ref_counts_[idx]));
    }
  }
  return ok_status();
}

}  // namespace ds
