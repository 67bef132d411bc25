// The paged latent cache's bookkeeping without a model: sizing, storage layout, and the block
// table checks a forward runs before it writes anything.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ds {
namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

testing::AssertionResult bad_input_mentioning(const Status& st, const std::string& text) {
  if (st.code() != ErrorCode::model_bad_input)
    return testing::AssertionFailure() << "code " << st.to_string() << ", want model_bad_input";
  if (st.message().find(text) == std::string::npos)
    return testing::AssertionFailure() << "'" << st.message() << "' does not mention '" << text << "'";
  return testing::AssertionSuccess();
}

TEST(KvCacheSizing, BlocksForTokensRoundsUp) {
  EXPECT_EQ(blocks_for_tokens(0, 16), 0);
  EXPECT_EQ(blocks_for_tokens(1, 16), 1);
  EXPECT_EQ(blocks_for_tokens(16, 16), 1);
  EXPECT_EQ(blocks_for_tokens(17, 16), 2);
  EXPECT_EQ(blocks_for_tokens(5, 1), 5);
}

TEST(KvCacheSizing, StandaloneSequenceOwnsEveryBlockInOrder) {
  const KvCacheConfig c = standalone_kv_cache_config(100, 16);
  EXPECT_EQ(c.block_size_tokens, 16);
  EXPECT_EQ(c.n_blocks, 7);
  const SequenceState s = make_standalone_sequence(c);
  EXPECT_EQ(s.block_table, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.n_tokens, 0);
  EXPECT_EQ(s.n_mtp_tokens, 0);
  EXPECT_EQ(standalone_kv_cache_config(64, 64).n_blocks, 1);
}

TEST(KvCacheSizing, DefaultBlockSizeIsAMultipleOfTheModelsRequirement) {
  KvCacheLayout layout;
  layout.block_size_multiple = 1;  // V3
  EXPECT_EQ(default_block_size_tokens(layout), 64);
  layout.block_size_multiple = 16;  // tiny V4: ratios 4 and 16
  EXPECT_EQ(default_block_size_tokens(layout), 64);
  layout.block_size_multiple = 128;  // V4-Flash: ratios 4 and 128
  EXPECT_EQ(default_block_size_tokens(layout), 128);
  layout.block_size_multiple = 48;
  EXPECT_EQ(default_block_size_tokens(layout), 192);
}

TEST(KvCacheSizing, TruncateLowersBothCounts) {
  SequenceState s{{0, 1}, 10, 9};
  truncate_sequence(s, 9);
  EXPECT_EQ(s.n_tokens, 9);
  EXPECT_EQ(s.n_mtp_tokens, 9);
  truncate_sequence(s, 4);
  EXPECT_EQ(s.n_tokens, 4);
  EXPECT_EQ(s.n_mtp_tokens, 4);
  EXPECT_EQ(s.block_table.size(), 2u) << "rollback keeps the blocks";
}

TEST(PagedLatentCache, SlotsAndBlocksTileOneAllocation) {
  Result<PagedLatentCache> r = PagedLatentCache::allocate(3, 5, {4, 6}, 1, kNoLimit);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const PagedLatentCache& c = *r;
  EXPECT_EQ(c.bytes(), 3 * 6 * 4 * 5 * 4);
  // Every (slot, block, row) has its own floats: write a distinct value through each view and
  // read them all back.
  std::set<const float*> seen;
  for (int s = 0; s < 3; ++s) {
    const LatentLayerView v = c.slot(s);
    EXPECT_EQ(v.n_blocks, 6);
    EXPECT_EQ(v.block_size, 4);
    EXPECT_EQ(v.row_dim, 5);
    for (int32_t b = 0; b < 6; ++b)
      for (int64_t x = 0; x < 4 * 5; ++x) {
        v.block(b)[x] = static_cast<float>((s * 6 + b) * 20 + x);
        seen.insert(v.block(b) + x);
      }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(3 * 6 * 4 * 5));
  for (int s = 0; s < 3; ++s)
    for (int32_t b = 0; b < 6; ++b)
      ASSERT_EQ(c.slot(s).block(b)[7], static_cast<float>((s * 6 + b) * 20 + 7));
}

// A caller's PageMemory (the decode server's shared segment in P/D): the pages come from it and go
// back to it when the cache goes; a memory that cannot provide them is an allocation error.
class CountingPageMemory final : public PageMemory {
 public:
  explicit CountingPageMemory(bool give) : give_(give) {}
  std::byte* allocate(size_t bytes) override {
    if (!give_) return nullptr;
    live += bytes;
    return static_cast<std::byte*>(std::aligned_alloc(64, bytes));
  }
  void release(std::byte* data, size_t bytes) override {
    live -= bytes;
    std::free(data);
  }
  size_t live = 0;

 private:
  bool give_;
};

TEST(PagedLatentCache, PagesComeFromTheCallersMemory) {
  auto memory = std::make_shared<CountingPageMemory>(true);
  {
    KvCacheConfig cfg{4, 6};
    cfg.memory = memory;
    Result<PagedLatentCache> r = PagedLatentCache::allocate(3, 5, cfg, 1, kNoLimit);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(memory->live, static_cast<size_t>((r->bytes() + 63) / 64 * 64));
    std::vector<KvPageArray> arrays;
    r->append_page_arrays(3, arrays);
    ASSERT_EQ(arrays.size(), 3u);
    r->slot(2).block(5)[19] = 42.0f;  // the last float of the allocation is writable
  }
  EXPECT_EQ(memory->live, 0u);
  KvCacheConfig none{4, 6};
  none.memory = std::make_shared<CountingPageMemory>(false);
  EXPECT_EQ(PagedLatentCache::allocate(3, 5, none, 1, kNoLimit).status().code(), ErrorCode::invalid_argument);
}

TEST(PagedLatentCache, RejectsBadConfigs) {
  auto code = [](const Result<PagedLatentCache>& r) { return r.ok() ? ErrorCode::ok : r.status().code(); };
  EXPECT_EQ(code(PagedLatentCache::allocate(2, 8, {0, 4}, 1, kNoLimit)), ErrorCode::invalid_argument);
  EXPECT_EQ(code(PagedLatentCache::allocate(2, 8, {-16, 4}, 1, kNoLimit)), ErrorCode::invalid_argument);
  EXPECT_EQ(code(PagedLatentCache::allocate(2, 8, {16, 0}, 1, kNoLimit)), ErrorCode::invalid_argument);
  // A block size that is not a multiple of the model's (V4's compression ratios).
  const Result<PagedLatentCache> odd = PagedLatentCache::allocate(2, 8, {6, 4}, 4, kNoLimit);
  EXPECT_EQ(code(odd), ErrorCode::invalid_argument);
  EXPECT_NE(odd.status().message().find("multiple of 4"), std::string::npos) << odd.status().message();
  EXPECT_TRUE(PagedLatentCache::allocate(2, 8, {8, 4}, 4, kNoLimit).ok());
  // Over the limit: exactly at it is fine, one block more is not.
  const int64_t bytes = 2 * 8 * 16 * 4 * 4;
  EXPECT_TRUE(PagedLatentCache::allocate(2, 8, {16, 4}, 1, bytes).ok());
  const Result<PagedLatentCache> big = PagedLatentCache::allocate(2, 8, {16, 5}, 1, bytes);
  EXPECT_EQ(code(big), ErrorCode::invalid_argument);
  EXPECT_NE(big.status().message().find("over the limit"), std::string::npos) << big.status().message();
  // A product that overflows int64 is over any limit, not a small wrapped number.
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(code(PagedLatentCache::allocate(1 << 20, int64_t{1} << 30, {max32, max32}, 1, kNoLimit)),
            ErrorCode::invalid_argument);
}

TEST(BlockUseCheck, AcceptsDisjointWritersAndSharedReadOnlyPrefixes) {
  const KvCacheConfig cfg{4, 10};
  BlockUseCheck check;
  // Request 0 decodes position 9 (blocks 0 1 2, writes 2); requests 1 and 2 share the prefix
  // blocks 0 1 read-only (positions 0..7) and each writes its own third block.
  const std::vector<int32_t> a = {0, 1, 2}, b = {0, 1, 5, 7}, c = {0, 1, 6};
  ASSERT_TRUE(check.add(0, a, 9, 10, cfg).ok());
  ASSERT_TRUE(check.add(1, b, 8, 11, cfg).ok());
  ASSERT_TRUE(check.add(2, c, 8, 12, cfg).ok());
  EXPECT_TRUE(check.check_conflicts().ok());
  // Entries past the positions in use are not looked at (the engine may keep spare ids there).
  check.clear();
  const std::vector<int32_t> spare = {3, -1, 99};
  EXPECT_TRUE(check.add(0, spare, 0, 4, cfg).ok());
  EXPECT_TRUE(check.check_conflicts().ok());
}

TEST(BlockUseCheck, RejectsShortTablesAndIdsOutOfRange) {
  const KvCacheConfig cfg{4, 10};
  BlockUseCheck check;
  const std::vector<int32_t> two = {0, 1};
  EXPECT_TRUE(check.add(3, two, 0, 8, cfg).ok());
  EXPECT_TRUE(bad_input_mentioning(check.add(3, two, 8, 9, cfg), "request 3: block table has 2 blocks"));
  const std::vector<int32_t> high = {0, 10}, negative = {-1};
  EXPECT_TRUE(bad_input_mentioning(check.add(1, high, 4, 5, cfg), "entry 1 is block 10, outside [0, 10)"));
  EXPECT_TRUE(
      bad_input_mentioning(check.add(2, negative, 0, 1, cfg), "request 2: block table entry 0 is block -1"));
  EXPECT_TRUE(bad_input_mentioning(check.add(0, two, 0, 1, KvCacheConfig{16, 0}), "not initialised"));
}

TEST(BlockUseCheck, RejectsABlockWrittenAndUsedElsewhere) {
  const KvCacheConfig cfg{4, 10};
  BlockUseCheck check;
  // Two requests writing the same block.
  const std::vector<int32_t> a = {0, 3}, b = {1, 3};
  ASSERT_TRUE(check.add(0, a, 5, 6, cfg).ok());
  ASSERT_TRUE(check.add(1, b, 6, 7, cfg).ok());
  EXPECT_TRUE(
      bad_input_mentioning(check.check_conflicts(), "requests 0 and 1: block 3 is written by request"));

  // One request writes a block another only reads: the reader would see rows of this call.
  check.clear();
  const std::vector<int32_t> writer = {2, 4}, reader = {2, 4, 5};
  ASSERT_TRUE(check.add(0, writer, 4, 6, cfg).ok());
  ASSERT_TRUE(check.add(1, reader, 8, 9, cfg).ok());
  EXPECT_TRUE(
      bad_input_mentioning(check.check_conflicts(), "block 4 is written by request 0 and read by request 1"));

  // A table naming the block it writes twice would overwrite its own earlier rows.
  check.clear();
  const std::vector<int32_t> twice = {6, 6};
  ASSERT_TRUE(check.add(2, twice, 4, 5, cfg).ok());
  EXPECT_TRUE(bad_input_mentioning(check.check_conflicts(), "request 2: block 6 appears twice"));

  // Read-only repeats are harmless (the same rows read twice), and a later call starts clean.
  check.clear();
  const std::vector<int32_t> reread = {7, 7, 8};
  ASSERT_TRUE(check.add(0, reread, 8, 9, cfg).ok());
  EXPECT_TRUE(check.check_conflicts().ok());
}

}  // namespace
}  // namespace ds
