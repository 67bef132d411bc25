#include "kvcache/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace ds {

// Reaches into a pool to break one invariant at a time, proving check_integrity() can fail.
struct BlockPoolTestAccess {
  static std::vector<int32_t>& ref_counts(BlockPool& pool) { return pool.ref_counts_; }
  static std::vector<int32_t>& next(BlockPool& pool) { return pool.next_; }
  static std::vector<int32_t>& prev(BlockPool& pool) { return pool.prev_; }
  static int32_t& n_free(BlockPool& pool) { return pool.n_free_; }
};

namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenReportsOutOfBlocks) {
  constexpr int32_t kNBlocks = 8;
  BlockPool pool(kNBlocks);
  EXPECT_EQ(pool.n_free(), kNBlocks);
  std::set<BlockId> seen;
  for (int32_t i = 0; i < kNBlocks; ++i) {
    Result<BlockId> block = pool.allocate();
    ASSERT_TRUE(block.ok()) << block.status().to_string();
    EXPECT_GE(*block, 0);
    EXPECT_LT(*block, kNBlocks);
    EXPECT_TRUE(seen.insert(*block).second) << "block " << *block << " handed out twice";
    EXPECT_EQ(pool.ref_count(*block), 1);
    EXPECT_EQ(pool.n_free(), kNBlocks - i - 1);
  }
  Result<BlockId> none = pool.allocate();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kvcache_out_of_blocks);
  EXPECT_EQ(none.status().kind(), ErrorKind::retryable);
  EXPECT_TRUE(pool.check_integrity().ok());

  // Freeing one makes exactly that one allocatable again.
  pool.release(3);
  EXPECT_EQ(pool.n_free(), 1);
  Result<BlockId> again = pool.allocate();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 3);
}

TEST(BlockPool, EmptyPoolIsOutOfBlocks) {
  BlockPool pool(0);
  EXPECT_EQ(pool.allocate().status().code(), ErrorCode::kvcache_out_of_blocks);
  EXPECT_TRUE(pool.check_integrity().ok());
}

TEST(BlockPool, SharedBlockReturnsToFreeListOnlyAfterLastRelease) {
  BlockPool pool(4);
  const BlockId block = pool.allocate().value();
  pool.add_ref(block);
  pool.add_ref(block);
  EXPECT_EQ(pool.ref_count(block), 3);
  EXPECT_EQ(pool.n_free(), 3);
  pool.release(block);
  pool.release(block);
  EXPECT_EQ(pool.ref_count(block), 1);
  EXPECT_EQ(pool.n_free(), 3);
  pool.release(block);
  EXPECT_EQ(pool.ref_count(block), 0);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_TRUE(pool.check_integrity().ok());
}

TEST(BlockPool, FreeListIsFifo) {
  BlockPool pool(3);
  const BlockId a = pool.allocate().value();
  const BlockId b = pool.allocate().value();
  const BlockId c = pool.allocate().value();
  pool.release(b);
  pool.release(a);
  pool.release(c);
  EXPECT_EQ(pool.allocate().value(), b);
  EXPECT_EQ(pool.allocate().value(), a);
  EXPECT_EQ(pool.allocate().value(), c);
}

TEST(BlockPoolDeathTest, MisuseIsAnInvariantFailure) {
  BlockPool pool(2);
  const BlockId block = pool.allocate().value();
  pool.release(block);
  EXPECT_DEATH(pool.release(block), "double free");
  EXPECT_DEATH(pool.add_ref(block), "add_ref of a free block");
  EXPECT_DEATH(pool.release(7), "out of range");
}

TEST(BlockPool, ReviveTakesAFreeBlockOutOfTheMiddleKeepingTheRestInOrder) {
  BlockPool pool(5);
  std::vector<BlockId> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(pool.allocate().value());
  for (const BlockId block : blocks) pool.release(block);  // free list: 0 1 2 3 4
  pool.revive(2);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{0, 1, 3, 4}));
  pool.revive(0);  // the front
  pool.revive(4);  // the back
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{1, 3}));
  EXPECT_EQ(pool.next_free(), 1);
  EXPECT_TRUE(pool.check_integrity().ok());
  pool.release(2);  // to the back, after the older releases
  EXPECT_EQ(pool.free_list(), (std::vector<BlockId>{1, 3, 2}));
  EXPECT_EQ(pool.allocate().value(), 1);
  EXPECT_EQ(pool.allocate().value(), 3);
  EXPECT_EQ(pool.allocate().value(), 2);
  EXPECT_EQ(pool.next_free(), -1);
  EXPECT_TRUE(pool.check_integrity().ok());
}

TEST(BlockPoolDeathTest, ReviveOfABlockInUseIsAnInvariantFailure) {
  BlockPool pool(2);
  const BlockId block = pool.allocate().value();
  EXPECT_DEATH(pool.revive(block), "revive of a block in use");
}

TEST(BlockPool, CheckIntegrityDetectsEachKindOfCorruption) {
  {
    BlockPool pool(4);
    BlockPoolTestAccess::ref_counts(pool)[0] = 1;  // on the free list yet referenced
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    const BlockId block = pool.allocate().value();
    BlockPoolTestAccess::ref_counts(pool)[static_cast<size_t>(block)] = 0;  // leaked: neither free nor used
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    BlockPoolTestAccess::next(pool)[1] = 3;  // skips block 2: it falls off the list
    BlockPoolTestAccess::prev(pool)[3] = 1;
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    BlockPoolTestAccess::next(pool)[2] = 1;  // a cycle: 0 1 2 1 ...
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    BlockPoolTestAccess::prev(pool)[2] = 0;  // forward links fine, backward link wrong
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    BlockPoolTestAccess::next(pool)[3] = 9;  // out of range
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    BlockPoolTestAccess::n_free(pool) = 3;  // counter disagrees with the list
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
  {
    BlockPool pool(4);
    const BlockId block = pool.allocate().value();
    BlockPoolTestAccess::next(pool)[static_cast<size_t>(block)] = 2;  // in use yet still linked
    EXPECT_EQ(pool.check_integrity().code(), ErrorCode::internal);
  }
}

// Drives the pool with a seeded random mix of operations against a plain model of who holds what,
// checking integrity and the model after every step.
TEST(BlockPool, RandomOperationsKeepIntegrity) {
  constexpr int32_t kNBlocks = 37;
  constexpr int kNOps = 20000;
  std::mt19937 rng(12345);
  BlockPool pool(kNBlocks);
  std::vector<int32_t> expected_refs(kNBlocks, 0);
  std::vector<BlockId> held;                 // one entry per reference the test owns
  std::vector<BlockId> expected_free_order;  // front = next to allocate (plain vector model of the list)
  for (BlockId block = 0; block < kNBlocks; ++block) expected_free_order.push_back(block);
  auto drop_from_free_order = [&](BlockId block) {
    expected_free_order.erase(std::find(expected_free_order.begin(), expected_free_order.end(), block));
  };
  int n_out_of_blocks = 0;
  int32_t max_refs_seen = 0;
  int n_returned_to_free = 0;
  int n_revived = 0;

  for (int op = 0; op < kNOps; ++op) {
    // Alternate fill and drain phases so the pool both runs dry and empties out repeatedly.
    const bool filling = (op / 1000) % 2 == 0;
    std::discrete_distribution<int> op_mix = filling ? std::discrete_distribution<int>({50, 20, 30})
                                                     : std::discrete_distribution<int>({20, 10, 70});
    const int choice = op_mix(rng);  // 0 allocate (or revive), 1 add_ref, 2 release
    if (choice == 0 && pool.n_free() > 0 && rng() % 4 == 0) {
      // Revive a random free block, as a prefix-cache hit on an unreferenced block does.
      const std::vector<BlockId> free_blocks = pool.free_list();
      const BlockId block = free_blocks[rng() % free_blocks.size()];
      pool.revive(block);
      ASSERT_EQ(expected_refs[static_cast<size_t>(block)], 0) << "op " << op;
      expected_refs[static_cast<size_t>(block)] = 1;
      drop_from_free_order(block);
      held.push_back(block);
      ++n_revived;
    } else if (choice == 0) {
      Result<BlockId> block = pool.allocate();
      const int32_t n_used = static_cast<int32_t>(
          std::count_if(expected_refs.begin(), expected_refs.end(), [](int32_t r) { return r > 0; }));
      if (n_used == kNBlocks) {
        ASSERT_EQ(block.status().code(), ErrorCode::kvcache_out_of_blocks);
        ++n_out_of_blocks;
      } else {
        ASSERT_TRUE(block.ok()) << "op " << op;
        ASSERT_EQ(expected_refs[static_cast<size_t>(*block)], 0) << "op " << op << ": allocated a used block";
        ASSERT_EQ(*block, expected_free_order.front()) << "op " << op << ": not the least recently released";
        expected_refs[static_cast<size_t>(*block)] = 1;
        drop_from_free_order(*block);
        held.push_back(*block);
      }
    } else if (!held.empty()) {
      const size_t pick = std::uniform_int_distribution<size_t>(0, held.size() - 1)(rng);
      const BlockId block = held[pick];
      if (choice == 1) {
        pool.add_ref(block);
        max_refs_seen = std::max(max_refs_seen, ++expected_refs[static_cast<size_t>(block)]);
        held.push_back(block);
      } else {
        pool.release(block);
        if (--expected_refs[static_cast<size_t>(block)] == 0) {
          ++n_returned_to_free;
          expected_free_order.push_back(block);
        }
        held[pick] = held.back();
        held.pop_back();
      }
    }
    const Status integrity = pool.check_integrity();
    ASSERT_TRUE(integrity.ok()) << "op " << op << ": " << integrity.to_string();
    int32_t n_expected_free = 0;
    for (BlockId block = 0; block < kNBlocks; ++block) {
      ASSERT_EQ(pool.ref_count(block), expected_refs[static_cast<size_t>(block)]) << "op " << op;
      n_expected_free += expected_refs[static_cast<size_t>(block)] == 0 ? 1 : 0;
    }
    ASSERT_EQ(pool.n_free(), n_expected_free) << "op " << op;
    ASSERT_EQ(pool.free_list(), expected_free_order) << "op " << op;
  }
  // The op mix must have exercised exhaustion and sharing, or the test proves little.
  EXPECT_GT(n_out_of_blocks, 0);
  EXPECT_GT(n_returned_to_free, 0);
  EXPECT_GT(max_refs_seen, 2);
  EXPECT_GT(n_revived, 0);

  for (const BlockId block : held) pool.release(block);
  EXPECT_EQ(pool.n_free(), kNBlocks);
  EXPECT_TRUE(pool.check_integrity().ok());
}

}  // namespace
}  // namespace ds
