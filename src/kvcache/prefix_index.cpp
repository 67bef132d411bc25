#include "kvcache/prefix_index.h"

#include <fmt/format.h>

#include "base/assert.h"

namespace ds {

PrefixIndex::PrefixIndex(int32_t n_blocks) {
  DS_ASSERT(n_blocks >= 0, "PrefixIndex needs a non-negative block count");
  hash_by_block_.assign(static_cast<size_t>(n_blocks), 0);
  registered_.assign(static_cast<size_t>(n_blocks), false);
  block_by_hash_.reserve(static_cast<size_t>(n_blocks));
}

BlockId PrefixIndex::find(uint64_t block_hash) const {
  const auto it = block_by_hash_.find(block_hash);
  return it == block_by_hash_.end() ? -1 : it->second;
}

bool PrefixIndex::insert(uint64_t block_hash, BlockId block_id) {
  DS_ASSERT(block_id >= 0 && static_cast<size_t>(block_id) < registered_.size(),
            "prefix index insert of a block id out of range");
  DS_ASSERT(!registered_[static_cast<size_t>(block_id)], "block registered twice in the prefix index");
  if (!block_by_hash_.emplace(block_hash, block_id).second) return false;
  hash_by_block_[static_cast<size_t>(block_id)] = block_hash;
  registered_[static_cast<size_t>(block_id)] = true;
  return true;
}

void PrefixIndex::erase_block(BlockId block_id) {
  DS_ASSERT(block_id >= 0 && static_cast<size_t>(block_id) < registered_.size(),
            "prefix index erase of a block id out of range");
  const auto idx = static_cast<size_t>(block_id);
  if (!registered_[idx]) return;
  block_by_hash_.erase(hash_by_block_[idx]);
  registered_[idx] = false;
  hash_by_block_[idx] = 0;
}

bool PrefixIndex::is_registered(BlockId block_id) const {
  DS_ASSERT(block_id >= 0 && static_cast<size_t>(block_id) < registered_.size(),
            "prefix index query of a block id out of range");
  return registered_[static_cast<size_t>(block_id)];
}

uint64_t PrefixIndex::hash_of(BlockId block_id) const {
  DS_ASSERT(is_registered(block_id), "hash_of an unregistered block");
  return hash_by_block_[static_cast<size_t>(block_id)];
}

Status PrefixIndex::check_integrity() const {
  size_t n_registered_blocks = 0;
  for (size_t idx = 0; idx < registered_.size(); ++idx) {
    if (!registered_[idx]) continue;
    ++n_registered_blocks;
    const auto it = block_by_hash_.find(hash_by_block_[idx]);
    if (it == block_by_hash_.end() || it->second != static_cast<BlockId>(idx)) {
      return Status(ErrorCode::internal,
                    fmt::format("block {} claims hash {:016x} but the index does not name it", idx,
                                hash_by_block_[idx]));
    }
  }
  for (const auto& [block_hash, block_id] : block_by_hash_) {
    if (block_id < 0 || static_cast<size_t>(block_id) >= registered_.size()) {
      return Status(ErrorCode::internal,
                    fmt::format("hash {:016x} names out-of-range block {}", block_hash, block_id));
    }
  }
  if (n_registered_blocks != block_by_hash_.size()) {
    return Status(ErrorCode::internal, fmt::format("{} hashes in the index but {} blocks registered",
                                                   block_by_hash_.size(), n_registered_blocks));
  }
  return ok_status();
}

}  // namespace ds
