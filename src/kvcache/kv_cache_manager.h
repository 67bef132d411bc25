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
// - close() releases a table's blocks last-first, so a finished sequence's tail (the part least
//   likely to be shared) is evicted before its head (vLLM does the same).
//
// Not thread-safe: owned and driven by the scheduler thread.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvcache/block_pool.h"
#include "kvcache/prefix_hash.h"
#include "kvcache/prefix_index.h"

namespace ds {

using SeqId = uint64_t;

struct KvCacheManagerConfig {
  int32_t block_size_tokens = 64;
  int32_t n_blocks = 0;
  uint64_t process_seed = 0;  // random per process (chosen by the caller; tests fix it)
  bool enable_prefix_caching = true;
  // Compression ratio of every compressed cache kind sharing the block ids (V4: 4 and 128; 0 or 1
  // entries mean uncompressed). A block must hold whole compressed entries, so block_size_tokens
  // must be a multiple of each ratio.
  std::vector<int32_t> compression_ratios;
  // Record every change of the prefix index as a KvCacheEvent (take_events()), for KV events.
  bool record_events = false;

  // invalid_argument naming the field when the block size is not positive, the block count is
  // negative, or the block size is not a multiple of a compression ratio.
  Status validate() const;
};

struct KvCacheStats {
  int64_t prefix_queries_tokens = 0;  // prompt tokens looked up (vLLM's prefix_cache_queries)
  int64_t prefix_hit_tokens = 0;      // of which found cached (prefix_cache_hits)
  int32_t n_blocks_total = 0;
  int32_t n_blocks_free = 0;    // free, including cached-but-unreferenced blocks
  int32_t n_blocks_cached = 0;  // registered in the prefix index (referenced or not)
  int64_t n_evictions = 0;      // cached blocks whose hash was dropped because they were reallocated
};

// A change of the prefix index (vLLM's KV events: BlockStored / BlockRemoved / AllBlocksCleared).
struct KvCacheEvent {
  enum class Kind : uint8_t { stored, removed, all_cleared };
  Kind kind = Kind::stored;
  std::vector<uint64_t> block_hashes;   // stored: consecutive blocks of one sequence, in order
  std::optional<uint64_t> parent_hash;  // stored: the block before the first (none at position 0)
  std::vector<TokenId> token_ids;       // stored: the blocks' tokens, block_size_tokens per block
  SeqId seq_id = 0;                     // stored: the sequence that committed them
  // stored: tier_salt_tag (kv_tier.h) of the committing request's cache salt, none when unsalted;
  // filled by the engine (the manager sees only the salt's hash key). Published at position 0 as
  // vLLM's extra_keys (kv_event_encoding.h), so a router keeps tenants' blocks apart.
  std::optional<uint64_t> salt_tag;
};

// What open() would match, without changing anything (admission checks).
struct PrefixProbe {
  int64_t n_hit_tokens = 0;       // a multiple of the block size, < prompt.size()
  int32_t n_hit_blocks_free = 0;  // of the matched blocks, those now unreferenced (open revives them)
};

class KvCacheManager {
 public:
  // Precondition: cfg.validate() is ok (callers validate configuration first; a bad one aborts).
  explicit KvCacheManager(const KvCacheManagerConfig& cfg);

  int32_t block_size_tokens() const;

  // Opens a sequence: matches the longest cached prefix of `prompt` under `cache_salt`, takes a
  // reference on each matched block and makes them the start of the sequence's block table.
  // Returns the number of prompt tokens already cached (a multiple of the block size, < prompt.size()).
  // Precondition: seq_id is not open; prompt is not empty.
  int64_t open(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt);
  // As above, matching at most max_hit_tokens tokens (rounded down to whole blocks); 0 opens the
  // sequence with an empty table. The scheduler uses it to refuse hits too short for SWA replay.
  int64_t open(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt,
               int64_t max_hit_tokens);

  // open() with no cap, not counted in the prefix stats (a KV tier restore; the sequence is
  // opened again, and counted, once its blocks arrived).
  int64_t open_uncounted(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt);

  // The match open() would make now (same rules), changing nothing, not counted in stats.
  PrefixProbe probe(std::span<const TokenId> prompt, std::string_view cache_salt,
                    int64_t max_hit_tokens = std::numeric_limits<int64_t>::max()) const;

  // Makes the block table cover n_tokens_total positions, allocating blocks at the end.
  // kvcache_out_of_blocks (retryable) when the pool cannot supply them; then nothing changed.
  Status grow(SeqId seq_id, int64_t n_tokens_total);

  // Speculative decoding's rollback: releases the blocks at the end of the table beyond those that
  // hold n_tokens_total positions (the rejected draft positions' blocks). Precondition: none of them
  // is committed (drafted positions are never committed before they are accepted).
  void shrink(SeqId seq_id, int64_t n_tokens_total);

  // Blocks grow() would need to cover n_tokens_total (0 if already covered); for admission checks.
  int32_t blocks_needed(SeqId seq_id, int64_t n_tokens_total) const;
  int32_t n_free_blocks() const;
  // Blocks needed to hold n_tokens positions from scratch.
  int32_t blocks_for_tokens(int64_t n_tokens) const;

  // The sequence's computed tokens are tokens[0 .. tokens.size()): registers every newly full block
  // in the prefix index (no-op when prefix caching is off). Calls for one sequence must pass growing
  // prefixes of the same token sequence; blocks beyond the table are ignored.
  void commit(SeqId seq_id, std::span<const TokenId> tokens);

  // Releases every block of the sequence and forgets it. Registered blocks stay cached.
  void close(SeqId seq_id);

  const std::vector<BlockId>& block_table(SeqId seq_id) const;
  // Chain hashes of the sequence's committed full blocks (block i's hash names positions
  // [0, (i + 1) * block_size)); the keys the KV tiers store them under.
  const std::vector<uint64_t>& block_hashes(SeqId seq_id) const;
  // Chain hashes of full blocks [0, n_blocks) of `tokens` under `cache_salt` (tier lookups).
  std::vector<uint64_t> chain_hashes(std::span<const TokenId> tokens, std::string_view cache_salt,
                                     int64_t n_blocks) const;
  bool is_open(SeqId seq_id) const;

  // Every hash the prefix index holds (any order): a router's snapshot, and the tests' check of events.
  std::vector<uint64_t> cached_hashes() const;
  // Index changes since the last call (empty unless config.record_events).
  std::vector<KvCacheEvent> take_events();

  // Drops the cached prefixes of `hashes` whose blocks nobody references (admin deletion): they stay
  // free, no longer cached. Blocks in use (tables, pins) are kept and counted in *n_in_use.
  // Returns how many were dropped.
  int32_t forget(std::span<const uint64_t> hashes, int32_t* n_in_use);
  // forget() of every cached block; when nothing stays cached the event is all_cleared.
  int32_t forget_all(int32_t* n_in_use);

  // Blocks for bytes written from outside the engine (P/D: a prefill server puts a prompt's KV
  // straight into them, docs/pd.md): n fresh blocks taken off the free list (whatever they cached is
  // evicted), each held by a pin until unpin(). None (nothing taken) when fewer than n are free.
  std::optional<std::vector<BlockId>> reserve_fresh(int32_t n);
  // The reserved blocks `block_ids` now hold blocks [first_block, first_block + block_ids.size())
  // of `tokens` under `cache_salt` (tokens covers at least those blocks): registers each in the
  // prefix index (stored events), so a request with that prefix hits them. A block whose prefix is
  // already cached elsewhere is left private. Returns how many were registered. The pins stay.
  int32_t adopt(std::span<const BlockId> block_ids, std::span<const TokenId> tokens,
                std::string_view cache_salt, int64_t first_block);

  // Pins keep a block out of reuse while a KV tier copies it (the tier writer): each pin is a
  // reference (a cached free block is revived). check_integrity() counts them with the tables.
  void pin(BlockId block_id);
  void unpin(BlockId block_id);
  int64_t n_pins() const;
  KvCacheStats stats() const;

  // Introspection for tests and metrics.
  bool is_block_cached(BlockId block_id) const { return index_.is_registered(block_id); }
  int32_t block_ref_count(BlockId block_id) const { return pool_.ref_count(block_id); }
  // Free blocks, next to be reused (evicted) first.
  std::vector<BlockId> free_list() const { return pool_.free_list(); }

  // Pool + index + tables consistent (ref count of each block == number of tables holding it, free
  // list == blocks with no reference, every index entry names a block whose hash matches). O(blocks).
  Status check_integrity() const;

 private:
  friend struct KvCacheManagerTestAccess;  // lets tests corrupt state to prove check_integrity() fails

  struct SeqBlocks {
    uint64_t hash_key = 0;               // prefix_hash_key(process seed, cache salt)
    std::vector<BlockId> table;          // block i holds positions [i * block_size, (i + 1) * block_size)
    std::vector<uint64_t> block_hashes;  // chain hashes of the first block_hashes.size() (full) blocks
  };

  const SeqBlocks& seq(SeqId seq_id) const;
  // Registers block_id under `hash` in the prefix index unless it or the hash is registered already,
  // and (record_events) adds it to `run`, the stored event of the current run of registered blocks
  // (a new one when null; reset to null when this block was not registered). True when registered.
  bool register_block(BlockId block_id, uint64_t hash, std::optional<uint64_t> parent,
                      std::span<const TokenId> block_tokens, SeqId seq_id, KvCacheEvent*& run);
  // A free block off the front of the free list, its cached prefix (if any) evicted. Precondition:
  // one is free.
  BlockId allocate_fresh();
  int64_t open_impl(SeqId seq_id, std::span<const TokenId> prompt, std::string_view cache_salt,
                    int64_t max_hit_tokens, bool counted);

  KvCacheManagerConfig cfg_;
  BlockPool pool_;
  PrefixIndex index_;
  std::unordered_map<SeqId, SeqBlocks> seqs_;
  std::unordered_map<BlockId, int32_t> pins_;
  int64_t prefix_queries_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t n_evictions_ = 0;
  std::vector<KvCacheEvent> events_;  // config.record_events only
  void record_removed(uint64_t hash);
};

}  // namespace ds
