// KvCacheManager: the engine's view of the paged KV cache, pure bookkeeping (no tensors).
// It owns the block pool of the token-indexed cache kinds (one BlockId names the same block_size
// token positions in every paged kind of the model: MLA latents for V3; compressed KV and indexer
// keys for V4; they grow in lockstep, so one id space serves them all), one block table per open
// sequence, and the prefix index that lets a new sequence start from blocks another one computed.
//
// Prefix caching (docs/kvcache.md):
// - Keys: chained keyed hashes over FULL blocks (kvcache/prefix_hash.h). The key mixes a per-process
//   seed with the request's cache salt, so tenants with different salts never share blocks.
// - A full block is registered in the index once its tokens are computed (commit). A registered
//   block whose last reference is released stays cached on the free list and can be revived by a
//   later match; allocation takes the least recently released free block and evicts its hash
//   (LRU over unreferenced blocks).
// - A match never covers the whole prompt: at least one prompt token is left to compute, so the
//   model produces the logits of the last position.
//
// Not thread-safe: owned and driven by the scheduler thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kvcache/block_pool.h"
#include "kvcache/prefix_hash.h"

namespace ds {

using SeqId = uint64_t;

struct KvCacheManagerConfig {
  int32_t block_size_tokens = 64;
  int32_t n_blocks = 0;
  uint64_t process_seed = 0;  // random per process (chosen by the caller; tests fix it)
  bool enable_prefix_caching = true;
};

struct KvCacheStats {
  int64_t prefix_queries_tokens = 0;  // prompt tokens looked up (vLLM's prefix_cache_queries)
  int64_t prefix_hit_tokens = 0;      // of which found cached (prefix_cache_hits)
  int32_t n_blocks_total = 0;
  int32_t n_blocks_free = 0;    // free, including cached-but-unreferenced blocks
  int32_t n_blocks_cached = 0;  // registered in the prefix index (referenced or not)
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheManagerConfig& cfg);

  int32_t block_size_tokens() const;

  // Opens a sequence: matches the longest cached prefix of `prompt` under `cache_salt`, takes a
  // reference on each matched block and makes them the start of the sequence's block table.
  // Returns the number of prompt tokens already cached (a multiple of the block size, < prompt.size()).
  // Precondition: seq_id is not open.
  int64_t open(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt);

  // Makes the block table cover n_tokens_total positions, allocating blocks at the end.
  // kvcache_out_of_blocks (retryable) when the pool cannot supply them; then nothing changed.
  Status grow(SeqId seq_id, int64_t n_tokens_total);

  // Blocks grow() would need to cover n_tokens_total (0 if already covered); for admission checks.
  int32_t blocks_needed(SeqId seq_id, int64_t n_tokens_total) const;
  int32_t n_free_blocks() const;

  // The sequence's computed tokens are tokens[0 .. tokens.size()): registers every newly full block
  // in the prefix index (no-op when prefix caching is off).
  void commit(SeqId seq_id, std::span<const TokenId> tokens);

  // Releases every block of the sequence and forgets it. Registered blocks stay cached.
  void close(SeqId seq_id);

  const std::vector<BlockId>& block_table(SeqId seq_id) const;
  bool is_open(SeqId seq_id) const;
  KvCacheStats stats() const;

  // Pool + index + tables consistent (ref count of each block == number of tables holding it, free
  // list == blocks with no reference, every index entry names a block whose hash matches). O(blocks).
  Status check_integrity() const;
};

}  // namespace ds
