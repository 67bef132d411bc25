#include "kvcache/prefix_index.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace ds {

struct PrefixIndexTestAccess {
  static std::unordered_map<uint64_t, BlockId>& block_by_hash(PrefixIndex& index) {
    return index.block_by_hash_;
  }
  static std::vector<uint64_t>& hash_by_block(PrefixIndex& index) { return index.hash_by_block_; }
};

namespace {

TEST(PrefixIndex, MapsBothWaysAndKeepsTheFirstBlockPerHash) {
  PrefixIndex index(8);
  EXPECT_EQ(index.find(0xabc), -1);
  EXPECT_TRUE(index.insert(0xabc, 3));
  EXPECT_EQ(index.find(0xabc), 3);
  EXPECT_TRUE(index.is_registered(3));
  EXPECT_EQ(index.hash_of(3), 0xabcu);
  // A second block computing the same prefix is not registered; the first stays.
  EXPECT_FALSE(index.insert(0xabc, 5));
  EXPECT_FALSE(index.is_registered(5));
  EXPECT_EQ(index.find(0xabc), 3);
  EXPECT_EQ(index.n_registered(), 1);
  EXPECT_TRUE(index.check_integrity().ok());

  index.erase_block(3);
  EXPECT_EQ(index.find(0xabc), -1);
  EXPECT_FALSE(index.is_registered(3));
  EXPECT_EQ(index.n_registered(), 0);
  index.erase_block(3);  // erasing an unregistered block is a no-op
  EXPECT_TRUE(index.insert(0xabc, 5));
  EXPECT_EQ(index.find(0xabc), 5);
  EXPECT_TRUE(index.check_integrity().ok());
}

TEST(PrefixIndexDeathTest, RegisteringABlockTwiceIsAnInvariantFailure) {
  PrefixIndex index(4);
  ASSERT_TRUE(index.insert(1, 2));
  EXPECT_DEATH((void)index.insert(7, 2), "registered twice");
  EXPECT_DEATH((void)index.insert(7, 4), "out of range");
}

TEST(PrefixIndex, CheckIntegrityDetectsDisagreement) {
  {
    PrefixIndex index(4);
    ASSERT_TRUE(index.insert(11, 1));
    PrefixIndexTestAccess::hash_by_block(index)[1] = 12;  // reverse map names a hash the index lacks
    EXPECT_EQ(index.check_integrity().code(), ErrorCode::internal);
  }
  {
    PrefixIndex index(4);
    ASSERT_TRUE(index.insert(11, 1));
    PrefixIndexTestAccess::block_by_hash(index)[11] = 2;  // forward map names another block
    EXPECT_EQ(index.check_integrity().code(), ErrorCode::internal);
  }
  {
    PrefixIndex index(4);
    PrefixIndexTestAccess::block_by_hash(index)[13] = 3;  // a hash for an unregistered block
    EXPECT_EQ(index.check_integrity().code(), ErrorCode::internal);
  }
}

TEST(PrefixIndex, RandomOperationsAgreeWithAPlainMap) {
  constexpr int32_t kNBlocks = 16;
  std::mt19937 rng(7);
  PrefixIndex index(kNBlocks);
  std::unordered_map<uint64_t, BlockId> expected;
  int n_rejected_duplicates = 0;
  for (int op = 0; op < 5000; ++op) {
    const auto block_id = static_cast<BlockId>(rng() % kNBlocks);
    const uint64_t block_hash = rng() % 24;  // few hashes, so duplicates happen
    if (rng() % 2 == 0 && !index.is_registered(block_id)) {
      const bool fresh = !expected.contains(block_hash);
      ASSERT_EQ(index.insert(block_hash, block_id), fresh) << "op " << op;
      if (fresh) {
        expected[block_hash] = block_id;
      } else {
        ++n_rejected_duplicates;
      }
    } else {
      if (index.is_registered(block_id)) expected.erase(index.hash_of(block_id));
      index.erase_block(block_id);
    }
    ASSERT_TRUE(index.check_integrity().ok()) << "op " << op;
    ASSERT_EQ(index.n_registered(), static_cast<int32_t>(expected.size()));
    for (uint64_t h = 0; h < 24; ++h) {
      const auto it = expected.find(h);
      ASSERT_EQ(index.find(h), it == expected.end() ? -1 : it->second) << "op " << op << " hash " << h;
    }
  }
  EXPECT_GT(n_rejected_duplicates, 0);
}

}  // namespace
}  // namespace ds
