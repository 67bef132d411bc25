// Prefix hashes: one 64-bit key per *full* block of token ids, chained so that block i's hash
// names the whole prefix 0..i, not just its own tokens. The prefix index maps these to cached blocks.
//
//   key    = process_seed ^ XXH3(salt)
//   hash_i = XXH3_withSeed(key, bytes(hash_{i-1}) ++ bytes(tokens of block i)),  hash_{-1} = 0
//
// process_seed: chosen per process (random at start-up, passed in; no global), so hashes cannot be
// predicted or replayed from outside. salt: per request (tenant / cache scope), so two tenants with
// the same prompt never share blocks (no cross-tenant timing side channel).
// A partial last block is never hashed: its contents are still growing.
// Bytes are host order (little-endian on every target we build); hashes are not a wire format.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ds {

using TokenId = int32_t;

// Combines the per-process seed with the request's salt; compute once per request.
uint64_t prefix_hash_key(uint64_t process_seed, std::string_view salt);

// Hash of one full block given the hash of the block before it (0 for the first block).
uint64_t hash_block(uint64_t key, uint64_t prev_hash, std::span<const TokenId> block_tokens);

// Chained hashes of the floor(tokens.size() / block_size_tokens) full blocks of `tokens`.
// block_size_tokens must be positive (a config invariant).
std::vector<uint64_t> hash_full_blocks(uint64_t key, std::span<const TokenId> tokens,
                                       int32_t block_size_tokens);

}  // namespace ds
