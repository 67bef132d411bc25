#include "kvcache/prefix_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ds {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ULL;

std::vector<TokenId> random_tokens(size_t n_tokens, uint32_t rng_seed) {
  std::mt19937 rng(rng_seed);
  std::uniform_int_distribution<TokenId> token(0, 129279);
  std::vector<TokenId> tokens(n_tokens);
  for (TokenId& t : tokens) t = token(rng);
  return tokens;
}

TEST(PrefixHash, SameTokensSameHashes) {
  const std::vector<TokenId> tokens = random_tokens(5 * kBlockSize, 1);
  const std::vector<TokenId> copy = tokens;
  const uint64_t key = prefix_hash_key(kSeed, "tenant-a");
  const std::vector<uint64_t> hashes = hash_full_blocks(key, tokens, kBlockSize);
  ASSERT_EQ(hashes.size(), 5u);
  EXPECT_EQ(hash_full_blocks(key, copy, kBlockSize), hashes);
  // Distinct blocks give distinct hashes (a constant or input-blind hash would fail here).
  for (size_t i = 0; i < hashes.size(); ++i) {
    for (size_t j = i + 1; j < hashes.size(); ++j) EXPECT_NE(hashes[i], hashes[j]);
  }
}

TEST(PrefixHash, ChainMatchesBlockByBlockHashing) {
  const std::vector<TokenId> tokens = random_tokens(3 * kBlockSize, 2);
  const uint64_t key = prefix_hash_key(kSeed, "");
  const std::vector<uint64_t> hashes = hash_full_blocks(key, tokens, kBlockSize);
  uint64_t prev_hash = 0;
  for (size_t block_idx = 0; block_idx < hashes.size(); ++block_idx) {
    prev_hash = hash_block(key, prev_hash, std::span(tokens).subspan(block_idx * kBlockSize, kBlockSize));
    EXPECT_EQ(hashes[block_idx], prev_hash) << "block " << block_idx;
  }
}

TEST(PrefixHash, ChangedTokenChangesItsBlockAndAllLaterOnly) {
  constexpr size_t kNBlocks = 6;
  const std::vector<TokenId> tokens = random_tokens(kNBlocks * kBlockSize, 3);
  const uint64_t key = prefix_hash_key(kSeed, "tenant-a");
  const std::vector<uint64_t> base = hash_full_blocks(key, tokens, kBlockSize);
  for (size_t changed_block = 0; changed_block < kNBlocks; ++changed_block) {
    for (const size_t offset : {size_t{0}, size_t{kBlockSize / 2}, size_t{kBlockSize - 1}}) {
      std::vector<TokenId> edited = tokens;
      edited[changed_block * kBlockSize + offset] ^= 1;
      const std::vector<uint64_t> hashes = hash_full_blocks(key, edited, kBlockSize);
      ASSERT_EQ(hashes.size(), kNBlocks);
      for (size_t block_idx = 0; block_idx < kNBlocks; ++block_idx) {
        if (block_idx < changed_block) {
          EXPECT_EQ(hashes[block_idx], base[block_idx])
              << "changed " << changed_block << " block " << block_idx;
        } else {
          EXPECT_NE(hashes[block_idx], base[block_idx])
              << "changed " << changed_block << " block " << block_idx;
        }
      }
    }
  }
}

TEST(PrefixHash, SaltAndSeedIsolate) {
  const std::vector<TokenId> tokens = random_tokens(4 * kBlockSize, 4);
  const std::vector<uint64_t> a = hash_full_blocks(prefix_hash_key(kSeed, "tenant-a"), tokens, kBlockSize);
  const std::vector<uint64_t> b = hash_full_blocks(prefix_hash_key(kSeed, "tenant-b"), tokens, kBlockSize);
  const std::vector<uint64_t> unsalted = hash_full_blocks(prefix_hash_key(kSeed, ""), tokens, kBlockSize);
  const std::vector<uint64_t> other_seed =
      hash_full_blocks(prefix_hash_key(kSeed + 1, "tenant-a"), tokens, kBlockSize);
  for (size_t block_idx = 0; block_idx < a.size(); ++block_idx) {
    EXPECT_NE(a[block_idx], b[block_idx]) << "block " << block_idx;
    EXPECT_NE(a[block_idx], unsalted[block_idx]) << "block " << block_idx;
    EXPECT_NE(a[block_idx], other_seed[block_idx]) << "block " << block_idx;
  }
}

TEST(PrefixHash, OnlyFullBlocksAreHashed) {
  const std::vector<TokenId> tokens = random_tokens(3 * kBlockSize + 5, 5);
  const uint64_t key = prefix_hash_key(kSeed, "tenant-a");
  const std::vector<uint64_t> hashes = hash_full_blocks(key, tokens, kBlockSize);
  ASSERT_EQ(hashes.size(), 3u);
  // The tail does not influence the full blocks' hashes.
  std::vector<TokenId> other_tail = tokens;
  other_tail.back() ^= 7;
  EXPECT_EQ(hash_full_blocks(key, other_tail, kBlockSize), hashes);
  EXPECT_EQ(hash_full_blocks(key, std::span(tokens).first(3 * kBlockSize), kBlockSize), hashes);
  EXPECT_TRUE(hash_full_blocks(key, std::span(tokens).first(kBlockSize - 1), kBlockSize).empty());
  EXPECT_TRUE(hash_full_blocks(key, std::span<const TokenId>(), kBlockSize).empty());
}

}  // namespace
}  // namespace ds
