#include "kvcache/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/assert.h"

namespace ds {

Status KvCacheManagerConfig::validate() const {
  if (block_size_tokens <= 0) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("kv cache block_size_tokens must be positive, got {}", block_size_tokens));
  }
  if (n_blocks < 0) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("kv cache n_blocks must not be negative, got {}", n_blocks));
  }
  for (const int32_t ratio : compression_ratios) {
    if (ratio < 0) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("kv cache compression ratio must not be negative, got {}", ratio));
    }
    if (ratio > 1 && block_size_tokens % ratio != 0) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("kv cache block_size_tokens {} is not a multiple of compression ratio {}",
                                block_size_tokens, ratio));
    }
  }
  return ok_status();
}

namespace {

const KvCacheManagerConfig& checked(const KvCacheManagerConfig& cfg) {
  DS_ASSERT(cfg.validate().ok(), "KvCacheManager built from an invalid config (validate it first)");
  return cfg;
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheManagerConfig& cfg)
    : cfg_(checked(cfg)), pool_(cfg.n_blocks), index_(cfg.n_blocks) {}

int32_t KvCacheManager::block_size_tokens() const { return cfg_.block_size_tokens; }

int32_t KvCacheManager::blocks_for_tokens(int64_t n_tokens) const {
  const int64_t block_size = cfg_.block_size_tokens;
  return static_cast<int32_t>((std::max<int64_t>(n_tokens, 0) + block_size - 1) / block_size);
}

const KvCacheManager::SeqBlocks& KvCacheManager::seq(SeqId seq_id) const {
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "kv cache: sequence is not open");
  return it->second;
}

PrefixProbe KvCacheManager::probe(std::span<const TokenId> prompt, std::string_view cache_salt,
                                  int64_t max_hit_tokens) const {
  PrefixProbe match;
  if (!cfg_.enable_prefix_caching || prompt.empty()) return match;
  const int64_t block_size = cfg_.block_size_tokens;
  // At least one prompt token stays uncached so the model computes the last position's logits.
  const int64_t max_blocks = std::min((static_cast<int64_t>(prompt.size()) - 1) / block_size,
                                      std::max<int64_t>(max_hit_tokens, 0) / block_size);
  const uint64_t key = prefix_hash_key(cfg_.process_seed, cache_salt);
  uint64_t prev_hash = 0;
  for (int64_t block_idx = 0; block_idx < max_blocks; ++block_idx) {
    prev_hash = hash_block(
        key, prev_hash,
        prompt.subspan(static_cast<size_t>(block_idx * block_size), static_cast<size_t>(block_size)));
    const BlockId block_id = index_.find(prev_hash);
    if (block_id < 0) break;
    match.n_hit_tokens += block_size;
    if (pool_.ref_count(block_id) == 0) ++match.n_hit_blocks_free;
  }
  return match;
}

int64_t KvCacheManager::open(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt) {
  return open(seq_id, prompt, cache_salt, std::numeric_limits<int64_t>::max());
}

int64_t KvCacheManager::open(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt,
                             int64_t max_hit_tokens) {
  return open_impl(seq_id, prompt, cache_salt, max_hit_tokens, /*counted=*/true);
}

int64_t KvCacheManager::open_uncounted(SeqId seq_id, std::span<const TokenId> prompt,
                                       std::string_view cache_salt) {
  return open_impl(seq_id, prompt, cache_salt, std::numeric_limits<int64_t>::max(), /*counted=*/false);
}

int64_t KvCacheManager::open_impl(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt,
                                  int64_t max_hit_tokens, bool counted) {
  DS_ASSERT(!prompt.empty(), "kv cache: open with an empty prompt");
  const auto [it, inserted] = seqs_.try_emplace(seq_id);
  DS_ASSERT(inserted, "kv cache: open of a sequence that is already open");
  SeqBlocks& blocks = it->second;
  blocks.hash_key = prefix_hash_key(cfg_.process_seed, cache_salt);
  if (!cfg_.enable_prefix_caching) return 0;

  if (counted) prefix_queries_tokens_ += static_cast<int64_t>(prompt.size());
  const int64_t block_size = cfg_.block_size_tokens;
  const int64_t max_blocks = std::min((static_cast<int64_t>(prompt.size()) - 1) / block_size,
                                      std::max<int64_t>(max_hit_tokens, 0) / block_size);
  uint64_t prev_hash = 0;
  for (int64_t block_idx = 0; block_idx < max_blocks; ++block_idx) {
    prev_hash = hash_block(
        blocks.hash_key, prev_hash,
        prompt.subspan(static_cast<size_t>(block_idx * block_size), static_cast<size_t>(block_size)));
    const BlockId block_id = index_.find(prev_hash);
    if (block_id < 0) break;
    if (pool_.ref_count(block_id) == 0) {
      pool_.revive(block_id);
    } else {
      pool_.add_ref(block_id);
    }
    blocks.table.push_back(block_id);
    blocks.block_hashes.push_back(prev_hash);
  }
  const int64_t n_hit_tokens = static_cast<int64_t>(blocks.table.size()) * block_size;
  if (counted) prefix_hit_tokens_ += n_hit_tokens;
  return n_hit_tokens;
}

int32_t KvCacheManager::blocks_needed(SeqId seq_id, int64_t n_tokens_total) const {
  const int32_t n_have = static_cast<int32_t>(seq(seq_id).table.size());
  return std::max(0, blocks_for_tokens(n_tokens_total) - n_have);
}

int32_t KvCacheManager::n_free_blocks() const { return pool_.n_free(); }

BlockId KvCacheManager::allocate_fresh() {
  Result<BlockId> block_id = pool_.allocate();
  DS_ASSERT(block_id.ok(), "kv cache: allocation failed after the free count said it would not");
  // The least recently released free block is reused: whatever prefix it cached is evicted.
  if (index_.is_registered(*block_id)) {
    record_removed(index_.hash_of(*block_id));
    index_.erase_block(*block_id);
    ++n_evictions_;
  }
  return *block_id;
}

Status KvCacheManager::grow(SeqId seq_id, int64_t n_tokens_total) {
  const int32_t n_needed = blocks_needed(seq_id, n_tokens_total);
  if (n_needed > pool_.n_free()) {
    return Status(ErrorCode::kvcache_out_of_blocks,
                  fmt::format("sequence {} needs {} more KV blocks for {} tokens, {} free", seq_id, n_needed,
                              n_tokens_total, pool_.n_free()));
  }
  std::vector<BlockId>& table = seqs_.find(seq_id)->second.table;
  for (int32_t i = 0; i < n_needed; ++i) table.push_back(allocate_fresh());
  return ok_status();
}

void KvCacheManager::shrink(SeqId seq_id, int64_t n_tokens_total) {
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "kv cache: shrink of a sequence that is not open");
  SeqBlocks& blocks = it->second;
  const size_t keep = static_cast<size_t>(blocks_for_tokens(n_tokens_total));
  DS_ASSERT(blocks.block_hashes.size() <= keep, "kv cache: shrink would drop a committed block");
  while (blocks.table.size() > keep) {
    pool_.release(blocks.table.back());
    blocks.table.pop_back();
  }
}

void KvCacheManager::commit(SeqId seq_id, std::span<const TokenId> tokens) {
  if (!cfg_.enable_prefix_caching) return;
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "kv cache: commit of a sequence that is not open");
  SeqBlocks& blocks = it->second;
  const size_t block_size = static_cast<size_t>(cfg_.block_size_tokens);
  const size_t n_full_blocks = std::min(tokens.size() / block_size, blocks.table.size());
  uint64_t prev_hash = blocks.block_hashes.empty() ? 0 : blocks.block_hashes.back();
  KvCacheEvent* run = nullptr;  // the stored event of the current run of newly registered blocks
  for (size_t block_idx = blocks.block_hashes.size(); block_idx < n_full_blocks; ++block_idx) {
    const uint64_t parent = prev_hash;
    const auto block_tokens = tokens.subspan(block_idx * block_size, block_size);
    prev_hash = hash_block(blocks.hash_key, prev_hash, block_tokens);
    blocks.block_hashes.push_back(prev_hash);
    (void)register_block(blocks.table[block_idx], prev_hash,
                         block_idx > 0 ? std::optional(parent) : std::nullopt, block_tokens, seq_id, run);
  }
}

bool KvCacheManager::register_block(BlockId block_id, uint64_t hash, std::optional<uint64_t> parent,
                                    std::span<const TokenId> block_tokens, SeqId seq_id, KvCacheEvent*& run) {
  // False when another copy registered the same prefix first: this one stays private.
  const bool registered = !index_.is_registered(block_id) && index_.insert(hash, block_id);
  if (!cfg_.record_events) return registered;
  if (!registered) {
    run = nullptr;  // the next stored run names this (already cached) hash as its parent
    return false;
  }
  if (run == nullptr) {
    run = &events_.emplace_back();
    run->kind = KvCacheEvent::Kind::stored;
    run->parent_hash = parent;
    run->seq_id = seq_id;
  }
  run->block_hashes.push_back(hash);
  run->token_ids.insert(run->token_ids.end(), block_tokens.begin(), block_tokens.end());
  return true;
}

void KvCacheManager::record_removed(uint64_t hash) {
  if (!cfg_.record_events) return;
  if (events_.empty() || events_.back().kind != KvCacheEvent::Kind::removed) {
    events_.emplace_back().kind = KvCacheEvent::Kind::removed;
  }
  events_.back().block_hashes.push_back(hash);
}

std::vector<KvCacheEvent> KvCacheManager::take_events() {
  std::vector<KvCacheEvent> out;
  out.swap(events_);
  return out;
}

int32_t KvCacheManager::forget(std::span<const uint64_t> hashes, int32_t* n_in_use) {
  int32_t n_dropped = 0;
  for (const uint64_t hash : hashes) {
    const BlockId block_id = index_.find(hash);
    if (block_id < 0) continue;
    if (pool_.ref_count(block_id) > 0) {
      if (n_in_use != nullptr) ++*n_in_use;
      continue;
    }
    record_removed(hash);
    index_.erase_block(block_id);
    ++n_dropped;
  }
  return n_dropped;
}

std::vector<uint64_t> KvCacheManager::cached_hashes() const {
  std::vector<uint64_t> hashes;
  for (BlockId b = 0; b < pool_.n_blocks(); ++b) {
    if (index_.is_registered(b)) hashes.push_back(index_.hash_of(b));
  }
  return hashes;
}

int32_t KvCacheManager::forget_all(int32_t* n_in_use) {
  const std::vector<uint64_t> hashes = cached_hashes();
  const size_t n_events_before = events_.size();
  const int32_t n_dropped = forget(hashes, n_in_use);
  if (cfg_.record_events && index_.n_registered() == 0 && n_dropped > 0) {
    // Nothing is cached any more: one all_cleared instead of the removals (vLLM's reset).
    events_.resize(n_events_before);
    events_.emplace_back().kind = KvCacheEvent::Kind::all_cleared;
  }
  return n_dropped;
}

void KvCacheManager::close(SeqId seq_id) {
  const auto it = seqs_.find(seq_id);
  DS_ASSERT(it != seqs_.end(), "kv cache: close of a sequence that is not open");
  const std::vector<BlockId>& table = it->second.table;
  for (auto block = table.rbegin(); block != table.rend(); ++block) pool_.release(*block);
  seqs_.erase(it);
}

const std::vector<BlockId>& KvCacheManager::block_table(SeqId seq_id) const { return seq(seq_id).table; }

const std::vector<uint64_t>& KvCacheManager::block_hashes(SeqId seq_id) const {
  return seq(seq_id).block_hashes;
}

std::vector<uint64_t> KvCacheManager::chain_hashes(std::span<const TokenId> tokens,
                                                   std::string_view cache_salt, int64_t n_blocks) const {
  const int64_t block_size = cfg_.block_size_tokens;
  n_blocks = std::min<int64_t>(n_blocks, static_cast<int64_t>(tokens.size()) / block_size);
  return hash_full_blocks(prefix_hash_key(cfg_.process_seed, cache_salt),
                          tokens.first(static_cast<size_t>(std::max<int64_t>(n_blocks, 0) * block_size)),
                          cfg_.block_size_tokens);
}

std::optional<std::vector<BlockId>> KvCacheManager::reserve_fresh(int32_t n) {
  if (n < 0 || n > pool_.n_free()) return std::nullopt;
  std::vector<BlockId> blocks;
  blocks.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    blocks.push_back(allocate_fresh());
    ++pins_[blocks.back()];
  }
  return blocks;
}

int32_t KvCacheManager::adopt(std::span<const BlockId> block_ids, std::span<const TokenId> tokens,
                              std::string_view cache_salt, int64_t first_block) {
  if (!cfg_.enable_prefix_caching || block_ids.empty()) return 0;
  const auto block_size = static_cast<size_t>(cfg_.block_size_tokens);
  const auto first = static_cast<size_t>(first_block);
  DS_ASSERT(first_block >= 0 && tokens.size() >= (first + block_ids.size()) * block_size,
            "kv cache: adopt of blocks beyond the tokens given");
  const std::vector<uint64_t> hashes =
      chain_hashes(tokens, cache_salt, static_cast<int64_t>(first + block_ids.size()));
  int32_t n_registered = 0;
  KvCacheEvent* run = nullptr;
  for (size_t i = 0; i < block_ids.size(); ++i) {
    DS_ASSERT(pins_.contains(block_ids[i]), "kv cache: adopt of a block that is not reserved");
    const size_t block_idx = first + i;
    if (register_block(block_ids[i], hashes[block_idx],
                       block_idx > 0 ? std::optional(hashes[block_idx - 1]) : std::nullopt,
                       tokens.subspan(block_idx * block_size, block_size), /*seq_id=*/0, run))
      ++n_registered;
  }
  return n_registered;
}

void KvCacheManager::pin(BlockId block_id) {
  DS_ASSERT(block_id >= 0 && block_id < pool_.n_blocks(), "kv cache: pin of an out-of-range block");
  if (pool_.ref_count(block_id) == 0) {
    pool_.revive(block_id);
  } else {
    pool_.add_ref(block_id);
  }
  ++pins_[block_id];
}

void KvCacheManager::unpin(BlockId block_id) {
  const auto it = pins_.find(block_id);
  DS_ASSERT(it != pins_.end(), "kv cache: unpin of a block that is not pinned");
  if (--it->second == 0) pins_.erase(it);
  pool_.release(block_id);
}

int64_t KvCacheManager::n_pins() const {
  int64_t n = 0;
  for (const auto& [block_id, n_block_pins] : pins_) n += n_block_pins;
  return n;
}

bool KvCacheManager::is_open(SeqId seq_id) const { return seqs_.contains(seq_id); }

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats stats;
  stats.prefix_queries_tokens = prefix_queries_tokens_;
  stats.prefix_hit_tokens = prefix_hit_tokens_;
  stats.n_blocks_total = pool_.n_blocks();
  stats.n_blocks_free = pool_.n_free();
  stats.n_blocks_cached = index_.n_registered();
  stats.n_evictions = n_evictions_;
  return stats;
}

Status KvCacheManager::check_integrity() const {
  DS_TRY(pool_.check_integrity());
  DS_TRY(index_.check_integrity());
  const auto n_blocks = static_cast<size_t>(pool_.n_blocks());
  std::vector<int32_t> n_holders(n_blocks, 0);
  std::vector<int64_t> position_of(n_blocks, -1);  // table index of a block, equal in every holder
  for (const auto& [seq_id, blocks] : seqs_) {
    if (blocks.block_hashes.size() > blocks.table.size()) {
      return Status(ErrorCode::internal, fmt::format("sequence {} has {} block hashes for {} blocks", seq_id,
                                                     blocks.block_hashes.size(), blocks.table.size()));
    }
    for (size_t block_idx = 0; block_idx < blocks.table.size(); ++block_idx) {
      const BlockId block_id = blocks.table[block_idx];
      if (block_id < 0 || static_cast<size_t>(block_id) >= n_blocks) {
        return Status(ErrorCode::internal,
                      fmt::format("sequence {} holds out-of-range block {}", seq_id, block_id));
      }
      const auto idx = static_cast<size_t>(block_id);
      ++n_holders[idx];
      // A shared block holds the same prefix for everyone, so it sits at the same table index.
      if (position_of[idx] >= 0 && position_of[idx] != static_cast<int64_t>(block_idx)) {
        return Status(ErrorCode::internal,
                      fmt::format("block {} is at table index {} of sequence {} but index {} elsewhere",
                                  block_id, block_idx, seq_id, position_of[idx]));
      }
      position_of[idx] = static_cast<int64_t>(block_idx);
      if (block_idx < blocks.block_hashes.size() && index_.is_registered(block_id) &&
          index_.hash_of(block_id) != blocks.block_hashes[block_idx]) {
        return Status(
            ErrorCode::internal,
            fmt::format("block {} is cached under hash {:016x} but sequence {} computed {:016x} for it",
                        block_id, index_.hash_of(block_id), seq_id, blocks.block_hashes[block_idx]));
      }
    }
  }
  std::vector<int32_t> n_block_pins(n_blocks, 0);
  for (const auto& [block_id, n_pins] : pins_) {
    if (block_id < 0 || static_cast<size_t>(block_id) >= n_blocks || n_pins <= 0) {
      return Status(ErrorCode::internal, fmt::format("block {} has {} pins", block_id, n_pins));
    }
    n_block_pins[static_cast<size_t>(block_id)] = n_pins;
  }
  for (size_t idx = 0; idx < n_blocks; ++idx) {
    const auto block_id = static_cast<BlockId>(idx);
    if (pool_.ref_count(block_id) != n_holders[idx] + n_block_pins[idx]) {
      return Status(ErrorCode::internal,
                    fmt::format("block {} has ref count {} but {} tables hold it and {} pins", idx,
                                pool_.ref_count(block_id), n_holders[idx], n_block_pins[idx]));
    }
    // Blocks are shared only through prefix matches, which hand out registered blocks; a
    // registered block in use is never evicted (only free blocks are reallocated).
    if (n_holders[idx] > 1 && !index_.is_registered(block_id)) {
      return Status(ErrorCode::internal,
                    fmt::format("block {} is shared by {} tables but not cached", idx, n_holders[idx]));
    }
  }
  // A shared registered block must be in every holder's hash chain (same salt, same prefix) once
  // the holder has hashed that far; matched blocks are hashed at open, so check holders' chains.
  for (const auto& [seq_id, blocks] : seqs_) {
    for (size_t block_idx = 0; block_idx < blocks.table.size(); ++block_idx) {
      const auto idx = static_cast<size_t>(blocks.table[block_idx]);
      if (n_holders[idx] > 1 && block_idx >= blocks.block_hashes.size()) {
        return Status(ErrorCode::internal,
                      fmt::format("sequence {} shares block {} at index {} without having its hash", seq_id,
                                  idx, block_idx));
      }
    }
  }
  return ok_status();
}

}  // namespace ds
