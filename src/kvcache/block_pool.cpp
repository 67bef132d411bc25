#include "kvcache/block_pool.h"

#include <fmt/format.h>

#include "base/assert.h"

namespace ds {

BlockPool::BlockPool(int32_t n_blocks) {
  DS_ASSERT(n_blocks >= 0, "BlockPool needs a non-negative block count");
  const auto n_links = static_cast<size_t>(n_blocks) + 1;
  ref_counts_.assign(static_cast<size_t>(n_blocks), 0);
  next_.assign(n_links, -1);
  prev_.assign(n_links, -1);
  next_[static_cast<size_t>(sentinel())] = sentinel();
  prev_[static_cast<size_t>(sentinel())] = sentinel();
  for (BlockId block_id = 0; block_id < n_blocks; ++block_id) push_back(block_id);
}

void BlockPool::push_back(BlockId block_id) {
  const auto idx = static_cast<size_t>(block_id);
  const auto end = static_cast<size_t>(sentinel());
  const int32_t old_back = prev_[end];
  next_[idx] = sentinel();
  prev_[idx] = old_back;
  next_[static_cast<size_t>(old_back)] = block_id;
  prev_[end] = block_id;
  ++n_free_;
}

void BlockPool::unlink(BlockId block_id) {
  const auto idx = static_cast<size_t>(block_id);
  next_[static_cast<size_t>(prev_[idx])] = next_[idx];
  prev_[static_cast<size_t>(next_[idx])] = prev_[idx];
  next_[idx] = -1;
  prev_[idx] = -1;
  --n_free_;
}

Result<BlockId> BlockPool::allocate() {
  if (n_free_ == 0) {
    return Status(ErrorCode::kvcache_out_of_blocks,
                  fmt::format("all {} KV blocks are in use", ref_counts_.size()));
  }
  const BlockId block_id = next_free();
  revive(block_id);
  return block_id;
}

void BlockPool::revive(BlockId block_id) {
  DS_ASSERT(block_id >= 0 && block_id < n_blocks(), "revive of a block id out of range");
  int32_t& refs = ref_counts_[static_cast<size_t>(block_id)];
  DS_ASSERT(refs == 0, "revive of a block in use");
  unlink(block_id);
  refs = 1;
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
  if (--refs == 0) push_back(block_id);
}

int32_t BlockPool::ref_count(BlockId block_id) const {
  DS_ASSERT(block_id >= 0 && block_id < n_blocks(), "ref_count of a block id out of range");
  return ref_counts_[static_cast<size_t>(block_id)];
}

BlockId BlockPool::next_free() const { return n_free_ == 0 ? -1 : next_[static_cast<size_t>(sentinel())]; }

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> blocks;
  blocks.reserve(static_cast<size_t>(n_free_));
  for (int32_t at = next_[static_cast<size_t>(sentinel())]; at != sentinel() && at >= 0;
       at = next_[static_cast<size_t>(at)]) {
    blocks.push_back(at);
    if (static_cast<int32_t>(blocks.size()) > n_blocks()) break;  // a cycle; check_integrity() reports it
  }
  return blocks;
}

Status BlockPool::check_integrity() const {
  const size_t n_links = ref_counts_.size() + 1;
  if (next_.size() != n_links || prev_.size() != n_links) {
    return Status(ErrorCode::internal, "free list link arrays have the wrong size");
  }
  // Walk the list front to back, checking both directions of every link.
  std::vector<bool> on_free_list(ref_counts_.size(), false);
  int32_t n_walked = 0;
  int32_t before = sentinel();
  for (int32_t at = next_[static_cast<size_t>(sentinel())]; at != sentinel();
       at = next_[static_cast<size_t>(at)]) {
    if (at < 0 || at >= n_blocks()) {
      return Status(ErrorCode::internal, fmt::format("free list holds out-of-range block {}", at));
    }
    const auto idx = static_cast<size_t>(at);
    if (on_free_list[idx]) {
      return Status(ErrorCode::internal, fmt::format("block {} is on the free list twice", at));
    }
    on_free_list[idx] = true;
    if (prev_[idx] != before) {
      return Status(ErrorCode::internal,
                    fmt::format("free block {} links back to {}, expected {}", at, prev_[idx], before));
    }
    if (ref_counts_[idx] != 0) {
      return Status(ErrorCode::internal, fmt::format("free block {} has ref count {}", at, ref_counts_[idx]));
    }
    before = at;
    ++n_walked;
  }
  if (prev_[static_cast<size_t>(sentinel())] != before) {
    return Status(ErrorCode::internal, "free list back pointer does not name its last block");
  }
  if (n_walked != n_free_) {
    return Status(ErrorCode::internal,
                  fmt::format("free list holds {} blocks but n_free is {}", n_walked, n_free_));
  }
  // Every block not on the free list must be in use and unlinked; with the walk above this
  // balances n_free + n_in_use == n_blocks.
  for (size_t idx = 0; idx < ref_counts_.size(); ++idx) {
    if (on_free_list[idx]) continue;
    if (ref_counts_[idx] <= 0) {
      return Status(ErrorCode::internal, fmt::format("block {} is neither free nor referenced (ref count {})",
                                                     idx, ref_counts_[idx]));
    }
    if (next_[idx] != -1 || prev_[idx] != -1) {
      return Status(ErrorCode::internal, fmt::format("block {} is in use but still linked", idx));
    }
  }
  return ok_status();
}

}  // namespace ds
