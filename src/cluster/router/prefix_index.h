// PrefixIndex: which prompt prefixes each worker probably holds in its KV cache, as chained hashes
// of whole token blocks (block k's hash covers tokens [0, (k + 1) * block_size), so holding block k
// means holding the whole prefix up to it, as in the engine's prefix cache).
//
// Fed two ways through one seam: the router's own routing history (record() after each decision,
// what SGLang's approximate tree does) for workers without a KV event stream, and the workers' KV
// events (kv_event_index.h: BlockStored -> record(), BlockRemoved -> remove(), each block re-hashed
// from its token ids with chain_block_hash()). Each worker's set is bounded (least recently used
// blocks go first), which stands in for the worker's own eviction when only history feeds it.
//
// Thread-safe: one mutex; a match over W workers and B blocks costs O(W * B) hash lookups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ds::cluster {

// The chain's start: what block 0 chains from.
inline constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc909ull;
// The hash of one block from the hash of the block before it (kRootBlockHash for block 0): how a KV
// event's block (its parent's hash and its token ids) lands on the same key as a request's block.
uint64_t chain_block_hash(uint64_t prev_hash, std::span<const int32_t> block_ids);
// What block 0 chains from under a cache salt: kRootBlockHash without one, else a root derived from
// the salt's tag (XXH3-64 of the salt, as the worker publishes it in its KV events' extra_keys and
// as salt_tag_of() computes it from a request), so one tenant's blocks never match another's prompt.
uint64_t root_block_hash(std::optional<uint64_t> salt_tag);
// The tag of a request's cache salt: XXH3-64 of its bytes (kvcache's tier_salt_tag; the worker's
// side of the same formula).
uint64_t salt_tag_of(std::string_view salt);
// The chained 64-bit hash of each whole block of `ids` (a trailing partial block has none).
std::vector<uint64_t> block_hashes(std::span<const int32_t> ids, int block_size_tokens,
                                   uint64_t root = kRootBlockHash);

class PrefixIndex {
 public:
  // `max_blocks_per_worker`: beyond it a worker's least recently used blocks are forgotten.
  explicit PrefixIndex(size_t max_blocks_per_worker);

  // The worker holds (or will hold once it served the request) these blocks; touches them as used.
  void record(size_t worker, std::span<const uint64_t> hashes);
  // The worker evicted these blocks (BlockRemoved).
  void remove(size_t worker, std::span<const uint64_t> hashes);
  // The worker lost its cache (restarted, left the pool).
  void clear(size_t worker);

  // For each worker in [0, n_workers): how many leading blocks of `hashes` it holds.
  std::vector<size_t> match(std::span<const uint64_t> hashes, size_t n_workers) const;
  size_t n_blocks(size_t worker) const;

 private:
  struct WorkerBlocks {
    std::list<uint64_t> lru;  // front = most recently used
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  };
  WorkerBlocks& blocks_of(size_t worker);  // grows the table; mu_ held

  const size_t max_blocks_per_worker_;
  mutable std::mutex mu_;
  std::vector<WorkerBlocks> workers_;
};

}  // namespace ds::cluster
