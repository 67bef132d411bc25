// DiskTier against a real folder: round trip, restart survival, corruption of every kind is a
// miss (and deleted), LRU within capacity; tier keys and entry framing.
#include "kvcache/disk_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include "kvcache/tier_entry_format.h"
#include "kvcache/tier_key.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    path = (fs::temp_directory_path() /
            ("ds_disk_tier_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}())))
               .string();
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

TierEntry make_entry(uint64_t key, uint64_t prev, size_t n_bytes, uint32_t seed) {
  TierEntry e;
  e.key = key;
  e.prev_key = prev;
  std::mt19937 rng(seed);
  for (int i = 0; i < 16; ++i) e.tokens.push_back(static_cast<int32_t>(rng() % 1000));
  e.bytes.resize(n_bytes);
  for (std::byte& b : e.bytes) b = static_cast<std::byte>(rng());
  return e;
}

std::unique_ptr<DiskTier> open_tier(const std::string& dir, int64_t capacity, uint64_t ns = 0xabc) {
  Result<std::unique_ptr<DiskTier>> tier = DiskTier::open({dir, capacity, ns, {}, {}});
  EXPECT_TRUE(tier.ok()) << tier.status().to_string();
  (*tier)->wait_for_scan();
  return std::move(tier).value();
}

void expect_same(const TierEntry& a, const TierEntry& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.prev_key, b.prev_key);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_TRUE(a.bytes == b.bytes);
}

TEST(DiskTier, WritesReadsAndSurvivesARestart) {
  TempDir dir;
  const TierEntry a = make_entry(1, 0, 4096, 1), b = make_entry(2, 1, 4096, 2);
  {
    auto tier = open_tier(dir.path, 1 << 20);
    EXPECT_EQ(tier->read(1).status().code(), ErrorCode::kvcache_tier_miss);
    ASSERT_TRUE(tier->write(a).ok());
    ASSERT_TRUE(tier->write(b).ok());
    const uint64_t keys[] = {1, 2, 3};
    EXPECT_EQ(tier->count_prefix(keys), 2);
    Result<TierEntry> got = tier->read(2);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_same(*got, b);
  }
  auto restarted = open_tier(dir.path, 1 << 20);
  EXPECT_EQ(restarted->stats().n_entries, 2);
  Result<TierEntry> got = restarted->read(1);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_same(*got, a);
  // Another model (namespace) sees none of it.
  auto other = open_tier(dir.path, 1 << 20, 0xdef);
  EXPECT_FALSE(other->contains(1));
}

TierEntry scoped_entry(uint64_t key, const std::string& salt, const std::string& cache_key) {
  TierEntry e = make_entry(key, 0, 512, static_cast<uint32_t>(key));
  e.scope = {tier_salt_tag(salt), cache_key};
  return e;
}

TEST(DiskTier, RemoveMatchingDeletesByScopeAlsoWhatAnotherServerWrote) {
  TempDir dir;
  auto a = open_tier(dir.path, 1 << 20);
  auto b = open_tier(dir.path, 1 << 20);  // a second server sharing the folder
  auto other_model = open_tier(dir.path, 1 << 20, 0xdef);
  ASSERT_TRUE(a->write(scoped_entry(1, "s1", "user-1/a")).ok());
  ASSERT_TRUE(a->write(scoped_entry(2, "s1", "user-2")).ok());
  ASSERT_TRUE(b->write(scoped_entry(3, "s2", "user-1/b")).ok());  // a never indexed it
  ASSERT_TRUE(b->write(scoped_entry(4, "", "")).ok());
  ASSERT_TRUE(other_model->write(scoped_entry(1, "s1", "user-1/a")).ok());
  // The scope round-trips through the file.
  Result<TierEntry> got = a->read(1);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->scope.salt_tag, tier_salt_tag("s1"));
  EXPECT_EQ(got->scope.cache_key, "user-1/a");

  auto removed = [&](const TierScopeFilter& f) {
    Result<int64_t> n = a->remove_matching(f);
    EXPECT_TRUE(n.ok()) << n.status().to_string();
    return n.ok() ? *n : -1;
  };
  EXPECT_EQ(removed({tier_salt_tag("s1"), "user-1"}), 1);  // both must match: entry 1 only
  EXPECT_FALSE(a->contains(1));
  EXPECT_FALSE(fs::exists(a->entry_path(1)));
  EXPECT_EQ(removed({std::nullopt, "user-1"}), 1);  // entry 3, written by b
  EXPECT_EQ(b->read(3).status().code(), ErrorCode::kvcache_tier_miss);
  EXPECT_EQ(removed({tier_salt_tag(""), std::nullopt}), 1);  // the unsalted entry 4
  EXPECT_EQ(removed({tier_salt_tag("nobody"), std::nullopt}), 0);
  EXPECT_TRUE(a->contains(2));
  EXPECT_EQ(removed({}), 1);  // everything left in this namespace: entry 2
  EXPECT_EQ(a->stats().n_entries, 0);
  EXPECT_EQ(a->stats().n_removed, 4);
  EXPECT_TRUE(other_model->read(1).ok()) << "another model's namespace is untouched";
}

TEST(TierEntryFormat, TheScopeIsCutAtItsLimitAndAShortHeadIsRefused) {
  TierEntry e = scoped_entry(9, "s", std::string(kMaxTierScopeKeyBytes + 10, 'k'));
  const std::vector<std::byte> bytes = encode_tier_entry(7, e);
  Result<TierEntryMeta> meta = peek_tier_entry(bytes);
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  EXPECT_EQ(meta->scope.cache_key, std::string(kMaxTierScopeKeyBytes, 'k'));
  EXPECT_EQ(meta->scope.salt_tag, tier_salt_tag("s"));
  Result<TierEntry> decoded = decode_tier_entry(7, 9, bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->scope.cache_key.size(), kMaxTierScopeKeyBytes);
  EXPECT_EQ(decoded->tokens, e.tokens);
  EXPECT_EQ(peek_tier_entry(std::span(bytes.data(), kTierEntryHeaderBytes + 5)).status().code(),
            ErrorCode::kvcache_tier_corrupt);
}

TEST(DiskTier, AFlippedByteATruncationOrAForeignFileIsAMissAndDeleted) {
  TempDir dir;
  auto tier = open_tier(dir.path, 1 << 20);
  for (uint64_t key = 1; key <= 3; ++key) ASSERT_TRUE(tier->write(make_entry(key, 0, 1000, 7)).ok());
  {  // flip one payload byte
    std::fstream f(tier->entry_path(1), std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(kTierEntryHeaderBytes + 64 + 500);
    f.seekg(at);
    const char original = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(original ^ 0x01));
  }
  fs::resize_file(tier->entry_path(2), 700);                // torn write
  fs::copy_file(tier->entry_path(3), tier->entry_path(4));  // an entry under another key's name
  auto reopened = open_tier(dir.path, 1 << 20);
  for (uint64_t key : {1u, 2u, 4u}) {
    EXPECT_EQ(reopened->read(key).status().code(), ErrorCode::kvcache_tier_corrupt) << key;
    EXPECT_FALSE(fs::exists(reopened->entry_path(key))) << key;
    EXPECT_EQ(reopened->read(key).status().code(), ErrorCode::kvcache_tier_miss) << key;
  }
  EXPECT_TRUE(reopened->read(3).ok());
  EXPECT_EQ(reopened->stats().n_corrupt, 3);
}

TEST(DiskTier, EvictsTheLeastRecentlyUsedOverCapacityAndCleansTempFiles) {
  TempDir dir;
  const int64_t entry_bytes =
      static_cast<int64_t>(encode_tier_entry(0xabc, make_entry(1, 0, 1000, 1)).size());
  auto tier = open_tier(dir.path, 3 * entry_bytes);
  for (uint64_t key = 1; key <= 3; ++key) ASSERT_TRUE(tier->write(make_entry(key, 0, 1000, 1)).ok());
  ASSERT_TRUE(tier->read(1).ok());  // 1 is now the most recent; 2 the least
  ASSERT_TRUE(tier->write(make_entry(4, 0, 1000, 1)).ok());
  EXPECT_FALSE(tier->contains(2));
  EXPECT_FALSE(fs::exists(tier->entry_path(2)));
  EXPECT_TRUE(tier->contains(1) && tier->contains(3) && tier->contains(4));
  EXPECT_EQ(tier->stats().n_evictions, 1);
  EXPECT_LE(tier->stats().bytes_stored, 3 * entry_bytes);

  const std::string tmp = fs::path(tier->entry_path(9)).parent_path() / ".tmp-0000000000000009-1-0";
  std::ofstream(tmp) << "half an entry";
  tier.reset();
  auto restarted = open_tier(dir.path, 3 * entry_bytes);
  EXPECT_FALSE(fs::exists(tmp)) << "a killed writer's temp file is removed at start-up";
  EXPECT_EQ(restarted->stats().n_entries, 3);
}

// A server restarted on a full folder serves requests before its scan is done: those look for the
// entry files themselves. The scan then adds the rest as less recently used than what was served.
TEST(DiskTier, LookupsDuringTheStartUpScanFindTheFilesAndKeepTheirRecency) {
  TempDir dir;
  const int64_t entry_bytes =
      static_cast<int64_t>(encode_tier_entry(0xabc, make_entry(1, 0, 1000, 1)).size());
  {
    auto writer = open_tier(dir.path, 1 << 20);
    for (uint64_t key = 1; key <= 3; ++key) ASSERT_TRUE(writer->write(make_entry(key, 0, 1000, 1)).ok());
  }
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  DiskTierConfig cfg{dir.path, 4 * entry_bytes, 0xabc, {}, [released] { released.wait(); }};
  Result<std::unique_ptr<DiskTier>> opened = DiskTier::open(cfg);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  // Let the scan go however the test leaves (a failed ASSERT too), or the tier's destructor waits.
  struct Release {
    std::promise<void>& p;
    bool done = false;
    void now() {
      if (!done) p.set_value();
      done = true;
    }
    ~Release() { now(); }
  } release_scan{release};
  DiskTier& tier = **opened;
  const uint64_t keys[] = {3, 2, 9};
  EXPECT_EQ(tier.count_prefix(keys), 2) << "entries on disk are found before the scan runs";
  EXPECT_TRUE(tier.contains(2));
  EXPECT_FALSE(tier.contains(9));
  Result<TierEntry> got = tier.read(3);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->key, 3u);
  EXPECT_EQ(tier.stats().n_entries, 2);
  release_scan.now();
  tier.wait_for_scan();
  EXPECT_EQ(tier.stats().n_entries, 3);
  EXPECT_EQ(tier.stats().bytes_stored, 3 * entry_bytes);
  // Over capacity by one: the entry only the scan found (1) is the least recently used.
  ASSERT_TRUE(tier.write(make_entry(4, 0, 1000, 1)).ok());
  ASSERT_TRUE(tier.write(make_entry(5, 0, 1000, 1)).ok());
  EXPECT_FALSE(tier.contains(1));
  EXPECT_TRUE(tier.contains(2) && tier.contains(3) && tier.contains(4) && tier.contains(5));
}

TEST(TierEntryFormat, EveryFlippedByteIsDetected) {
  const TierEntry e = make_entry(42, 41, 64, 3);
  const std::vector<std::byte> bytes = encode_tier_entry(9, e);
  Result<TierEntry> ok = decode_tier_entry(9, 42, bytes);
  ASSERT_TRUE(ok.ok());
  expect_same(*ok, e);
  EXPECT_EQ(decode_tier_entry(8, 42, bytes).status().code(), ErrorCode::kvcache_tier_corrupt);
  EXPECT_EQ(decode_tier_entry(9, 43, bytes).status().code(), ErrorCode::kvcache_tier_corrupt);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<std::byte> flipped = bytes;
    flipped[i] ^= std::byte{0x10};
    EXPECT_EQ(decode_tier_entry(9, 42, flipped).status().code(), ErrorCode::kvcache_tier_corrupt) << i;
  }
  for (size_t n = 0; n < bytes.size(); n += 7) {
    EXPECT_FALSE(decode_tier_entry(9, 42, std::span(bytes).first(n)).ok()) << n;
  }
}

TEST(TierKey, TheNamespaceCoversEveryFieldAndTheSecretIsStable) {
  const TierNamespaceSpec base{
      .model_fingerprint = 1, .kv_layout = "v3/f32", .block_size_tokens = 64, .block_bytes = 100};
  const uint64_t ns = tier_namespace(base);
  TierNamespaceSpec s = base;
  s.model_fingerprint = 2;
  EXPECT_NE(tier_namespace(s), ns);
  s = base;
  s.kv_layout = "v4/f32";
  EXPECT_NE(tier_namespace(s), ns);
  s = base;
  s.block_size_tokens = 128;
  EXPECT_NE(tier_namespace(s), ns);
  s = base;
  s.block_bytes = 101;
  EXPECT_NE(tier_namespace(s), ns);

  TempDir dir;
  const std::string path = dir.path + "/secret";
  Result<std::vector<std::byte>> first = load_or_create_tier_secret(path);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->size(), 32u);
  EXPECT_EQ((fs::status(path).permissions() & fs::perms::others_read), fs::perms::none);
  Result<std::vector<std::byte>> again = load_or_create_tier_secret(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*first == *again);
  EXPECT_EQ(tier_prefix_seed(*first, ns), tier_prefix_seed(*again, ns));
  EXPECT_NE(tier_prefix_seed(*first, ns), tier_prefix_seed(*first, ns + 1));
  TempDir other;
  Result<std::vector<std::byte>> fresh = load_or_create_tier_secret(other.path + "/secret");
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(tier_prefix_seed(*first, ns), tier_prefix_seed(*fresh, ns)) << "a new secret, new keys";
  std::ofstream(other.path + "/short") << "tiny";
  EXPECT_EQ(load_or_create_tier_secret(other.path + "/short").status().code(), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ds
