#include "kvcache/prefix_hash.h"

#include <xxhash.h>

#include <cstring>

#include "base/assert.h"

namespace ds {

uint64_t prefix_hash_key(uint64_t process_seed, std::string_view salt) {
  return process_seed ^ XXH3_64bits(salt.data(), salt.size());
}

uint64_t hash_block(uint64_t key, uint64_t prev_hash, std::span<const TokenId> block_tokens) {
  // One contiguous buffer so the block is hashed in a single one-shot XXH3 call; the copy is a
  // few hundred bytes per block and happens once per block per request.
  std::vector<unsigned char> bytes(sizeof(prev_hash) + block_tokens.size_bytes());
  std::memcpy(bytes.data(), &prev_hash, sizeof(prev_hash));
  if (!block_tokens.empty()) {
    std::memcpy(bytes.data() + sizeof(prev_hash), block_tokens.data(), block_tokens.size_bytes());
  }
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), key);
}

std::vector<uint64_t> hash_full_blocks(uint64_t key, std::span<const TokenId> tokens,
                                       int32_t block_size_tokens) {
  DS_ASSERT(block_size_tokens > 0, "block size must be positive");
  const size_t block_size = static_cast<size_t>(block_size_tokens);
  const size_t n_full_blocks = tokens.size() / block_size;
  std::vector<uint64_t> hashes;
  hashes.reserve(n_full_blocks);
  uint64_t prev_hash = 0;
  for (size_t block_idx = 0; block_idx < n_full_blocks; ++block_idx) {
    prev_hash = hash_block(key, prev_hash, tokens.subspan(block_idx * block_size, block_size));
    hashes.push_back(prev_hash);
  }
  return hashes;
}

}  // namespace ds
