#include "cluster/router/prefix_index.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ds::cluster {
namespace {

std::vector<int32_t> random_ids(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 100000);
  return ids;
}

TEST(BlockHashes, WholeBlocksOnlyAndChainedOverThePrefix) {
  const std::vector<int32_t> a = random_ids(100, 1);
  EXPECT_EQ(block_hashes(a, 16).size(), 6u);  // 96 of 100 tokens
  EXPECT_TRUE(block_hashes(std::vector<int32_t>(a.begin(), a.begin() + 15), 16).empty());
  // Same first block, different second block: hash 0 equal, hash 1 differs.
  std::vector<int32_t> b = a;
  b[20] += 1;
  const auto ha = block_hashes(a, 16), hb = block_hashes(b, 16);
  EXPECT_EQ(ha[0], hb[0]);
  for (size_t k = 1; k < ha.size(); ++k) EXPECT_NE(ha[k], hb[k]) << k;  // chained: every later block too
  // A change in block 0 changes every hash, even where the block's own tokens are equal.
  std::vector<int32_t> c = a;
  c[0] += 1;
  const auto hc = block_hashes(c, 16);
  for (size_t k = 0; k < ha.size(); ++k) EXPECT_NE(ha[k], hc[k]) << k;
}

TEST(PrefixIndex, MatchCountsLeadingBlocksPerWorker) {
  PrefixIndex index(1000);
  const auto system_a = random_ids(64, 2), system_b = random_ids(64, 3);
  std::vector<int32_t> req_a = system_a, req_b = system_b;
  const auto tail = random_ids(32, 4);
  req_a.insert(req_a.end(), tail.begin(), tail.end());
  req_b.insert(req_b.end(), tail.begin(), tail.end());
  const auto ha = block_hashes(req_a, 16), hb = block_hashes(req_b, 16);
  index.record(0, ha);
  index.record(1, hb);
  // A new request on system prompt A with another tail: worker 0 has its 4 system blocks.
  std::vector<int32_t> next = system_a;
  const auto tail2 = random_ids(32, 5);
  next.insert(next.end(), tail2.begin(), tail2.end());
  const auto m = index.match(block_hashes(next, 16), 3);
  EXPECT_EQ(m, (std::vector<size_t>{4, 0, 0}));
  EXPECT_EQ(index.match(hb, 2), (std::vector<size_t>{0, hb.size()}));
}

TEST(PrefixIndex, RemoveAndClearAndLruBound) {
  PrefixIndex index(8);
  const auto h = block_hashes(random_ids(160, 6), 16);  // 10 blocks
  index.record(0, h);
  EXPECT_EQ(index.n_blocks(0), 8u);     // the two least recently used (the first two) went
  EXPECT_EQ(index.match(h, 1)[0], 0u);  // so no leading match at all
  index.record(0, std::span(h).first(4));
  EXPECT_EQ(index.n_blocks(0), 8u);
  EXPECT_EQ(index.match(h, 1)[0], 4u);          // blocks 4, 5 were evicted to make room
  index.remove(0, std::span(h).subspan(1, 1));  // BlockRemoved of block 1
  EXPECT_EQ(index.match(h, 1)[0], 1u);
  index.clear(0);
  EXPECT_EQ(index.n_blocks(0), 0u);
}

}  // namespace
}  // namespace ds::cluster
