// TierStore over a real DiskTier and a test pool of bytes (the model's role): blocks written
// from the pool come back bit-identical into other blocks; tokens or parent that do not match
// stop a restore; a full write queue drops instead of waiting.
#include "kvcache/tier_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>

#include "kvcache/disk_tier.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBlockBytes = 3000;

// Test double for the model's paged storage.
struct TestPool {
  explicit TestPool(int n_blocks) : bytes(static_cast<size_t>(n_blocks * kBlockBytes)) {
    std::mt19937 rng(5);
    for (std::byte& b : bytes) b = static_cast<std::byte>(rng());
  }
  std::span<std::byte> block(int32_t id) {
    return std::span(bytes).subspan(static_cast<size_t>(id * kBlockBytes), kBlockBytes);
  }
  TierBlockIo io() {
    TierBlockIo io;
    io.block_bytes = kBlockBytes;
    io.export_block = [this](int32_t id, std::span<std::byte> out) {
      ++n_exports_started;
      while (hold_exports) std::this_thread::yield();
      std::memcpy(out.data(), block(id).data(), kBlockBytes);
      return ok_status();
    };
    io.import_block = [this](int32_t id, std::span<const std::byte> in) {
      std::memcpy(block(id).data(), in.data(), kBlockBytes);
      return ok_status();
    };
    return io;
  }
  std::vector<std::byte> bytes;
  std::atomic<bool> hold_exports{false};
  std::atomic<int> n_exports_started{0};
};

struct Fixture {
  Fixture() : dir((fs::temp_directory_path() / ("ds_tier_store_" + std::to_string(::getpid()))).string()) {
    fs::remove_all(dir);
    auto opened = DiskTier::open({dir, 1 << 24, 1, {}, {}});
    EXPECT_TRUE(opened.ok());
    (*opened)->wait_for_scan();
    disk = std::shared_ptr<DiskTier>(std::move(opened).value());
  }
  ~Fixture() { fs::remove_all(dir); }
  std::string dir;
  std::shared_ptr<DiskTier> disk;
};

std::vector<TierBlockRef> refs(std::initializer_list<int32_t> block_ids, uint64_t first_key) {
  std::vector<TierBlockRef> out;
  uint64_t key = first_key;
  for (const int32_t id : block_ids) {
    TierBlockRef r;
    r.prev_key = out.empty() ? 0 : out.back().key;
    r.key = key++;
    r.block_id = id;
    r.tokens = {static_cast<int32_t>(r.key), 1, 2, 3};
    out.push_back(r);
  }
  return out;
}

TEST(TierStore, WrittenBlocksRestoreBitIdenticallyIntoOtherBlocks) {
  Fixture f;
  TestPool pool(8);
  TierStore store({f.disk}, pool.io(), 4);
  ASSERT_TRUE(store.submit_write(refs({0, 1, 2}, 100)));
  store.drain();
  TierCompletions done = store.take_completed();
  ASSERT_EQ(done.written.size(), 1u);
  EXPECT_EQ(done.written[0], (std::vector<int32_t>{0, 1, 2}));
  const uint64_t keys[] = {100, 101, 102, 103};
  EXPECT_EQ(store.count_prefix(keys), 3);

  std::vector<TierBlockRef> into = refs({5, 6, 7}, 100);
  store.submit_restore(9, into);
  store.drain();
  done = store.take_completed();
  ASSERT_EQ(done.restored.size(), 1u);
  EXPECT_EQ(done.restored[0].seq_id, 9u);
  EXPECT_EQ(done.restored[0].n_blocks_restored, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::memcmp(pool.block(i).data(), pool.block(5 + i).data(), kBlockBytes), 0) << i;
  }
  // Writing the same blocks again touches no tier.
  ASSERT_TRUE(store.submit_write(refs({0, 1, 2}, 100)));
  store.drain();
  EXPECT_EQ(store.stats().n_blocks_written, 3);
  EXPECT_EQ(store.stats().n_blocks_already_stored, 3);
  EXPECT_GT(store.stats().write_cpu_ns_total, 0);  // the writer thread's CPU on those jobs is counted
}

// A prompt's blocks split over two tiers (a P/D decode server: its SSD holds the first ones, the
// landing tier the rest): the lookup counts the run across both and the restore reads each block
// from the tier that has it.
TEST(TierStore, ARunSplitOverTwoTiersIsCountedAndRestoredWhole) {
  Fixture f;
  const std::string second_dir = f.dir + "_second";
  fs::remove_all(second_dir);
  std::shared_ptr<DiskTier> second_disk(std::move(DiskTier::open({second_dir, 1 << 24, 1, {}, {}})).value());
  second_disk->wait_for_scan();
  TestPool pool(8);
  const std::vector<TierBlockRef> all = refs({0, 1, 2, 3}, 100);
  {
    TierStore first({f.disk}, pool.io(), 4), second({second_disk}, pool.io(), 4);
    ASSERT_TRUE(first.submit_write({all.begin(), all.begin() + 2}));
    ASSERT_TRUE(second.submit_write({all.begin() + 2, all.end()}));
    first.drain();
    second.drain();
  }
  TierStore store({f.disk, second_disk}, pool.io(), 4);
  const uint64_t keys[] = {100, 101, 102, 103, 104};
  EXPECT_EQ(f.disk->count_prefix(keys), 2);
  EXPECT_EQ(second_disk->count_prefix(std::span(keys).subspan(2)), 2);
  EXPECT_EQ(store.count_prefix(keys), 4);
  EXPECT_EQ(store.count_prefix(std::span(keys).subspan(1)), 3);

  std::vector<TierBlockRef> into = all;
  for (int i = 0; i < 4; ++i) into[static_cast<size_t>(i)].block_id = 4 + i;
  store.submit_restore(3, into);
  store.drain();
  const TierCompletions done = store.take_completed();
  ASSERT_EQ(done.restored.size(), 1u);
  EXPECT_EQ(done.restored[0].n_blocks_restored, 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(std::memcmp(pool.block(i).data(), pool.block(4 + i).data(), kBlockBytes), 0) << i;
  fs::remove_all(second_dir);
}

TEST(TierStore, ARestoreStopsAtTheFirstBlockWhoseTokensOrParentDiffer) {
  Fixture f;
  TestPool pool(8);
  TierStore store({f.disk}, pool.io(), 4);
  ASSERT_TRUE(store.submit_write(refs({0, 1, 2}, 100)));
  store.drain();
  std::vector<TierBlockRef> into = refs({5, 6, 7}, 100);
  into[1].tokens[2] = 99;  // a different prompt hashing to the same key (a collision)
  store.submit_restore(1, into);
  into = refs({5, 6, 7}, 100);
  into[2].prev_key = 7;
  store.submit_restore(2, into);
  store.drain();
  const TierCompletions done = store.take_completed();
  ASSERT_EQ(done.restored.size(), 2u);
  EXPECT_EQ(done.restored[0].n_blocks_restored, 1);
  EXPECT_EQ(done.restored[1].n_blocks_restored, 2);
  EXPECT_EQ(store.stats().n_restore_failures, 2);
}

TEST(TierStore, AFullWriteQueueDropsAndCountsInsteadOfWaiting) {
  Fixture f;
  TestPool pool(8);
  TierStore store({f.disk}, pool.io(), 2);
  pool.hold_exports = true;  // the writer is stuck inside its first job
  ASSERT_TRUE(store.submit_write(refs({0}, 1)));
  while (pool.n_exports_started == 0) std::this_thread::yield();
  while (store.stats().n_write_jobs_dropped == 0) {
    // Fill the queue behind the stuck job until one is refused.
    if (!store.submit_write(refs({1}, 2))) break;
  }
  EXPECT_EQ(store.stats().n_write_jobs_dropped, 1);
  pool.hold_exports = false;
  store.drain();
  EXPECT_EQ(store.take_completed().written.size(), 3u) << "the stuck job and the two queued ones";
}

}  // namespace
}  // namespace ds
