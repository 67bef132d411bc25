// TTL per traffic class: the --kv-ttl parser, and expiry in the SSD tier under an injected clock
// (an expired entry is never served, and is deleted by the lookup, the read or the start-up scan).
#include "kvcache/tier_ttl.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "kvcache/disk_tier.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

TEST(TierTtl, ParsesClassesUnitsAndTheDefault) {
  Result<TierTtlPolicy> p = TierTtlPolicy::parse("chat=7d,agent=3d,default=1d,probe=90s,batch=2h,quick=5m");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->ttl_for("chat"), 7 * 86400);
  EXPECT_EQ(p->ttl_for("agent"), 3 * 86400);
  EXPECT_EQ(p->ttl_for("probe"), 90);
  EXPECT_EQ(p->ttl_for("batch"), 7200);
  EXPECT_EQ(p->ttl_for("quick"), 300);
  EXPECT_EQ(p->ttl_for(""), 86400);
  EXPECT_EQ(p->ttl_for("unknown"), 86400);
  for (const char* bad : {"chat", "=1d", "chat=", "chat=7", "chat=7w", "chat=xd", "chat=0s", "chat=-1d"}) {
    const Result<TierTtlPolicy> r = TierTtlPolicy::parse(bad);
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument) << bad;
    EXPECT_NE(r.status().message().find("--kv-ttl"), std::string::npos) << bad;
  }
}

TEST(TierTtl, AnExpiredSsdEntryIsNeverServedAndIsReclaimed) {
  const std::string dir =
      (fs::temp_directory_path() / ("ds_tier_ttl_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  auto now = std::make_shared<std::atomic<int64_t>>(1'000'000);
  const DiskTierConfig cfg{dir, 1 << 20, 3, [now] { return now->load(); }, {}};
  auto entry = [&](uint64_t key, int64_t ttl_s) {
    TierEntry e;
    e.key = key;
    e.tokens = {1, 2};
    e.bytes.assign(100, std::byte{7});
    e.expires_at_unix_s = now->load() + ttl_s;
    return e;
  };
  {
    auto tier = std::move(DiskTier::open(cfg)).value();
    tier->wait_for_scan();
    ASSERT_TRUE(tier->write(entry(1, 10)).ok());    // e.g. agent traffic
    ASSERT_TRUE(tier->write(entry(2, 1000)).ok());  // chat
    ASSERT_TRUE(tier->write(entry(3, 20)).ok());
    *now += 5;
    EXPECT_TRUE(tier->read(1).ok());
    *now += 5;  // entry 1 expires now
    const uint64_t keys[] = {1, 2};
    EXPECT_EQ(tier->count_prefix(keys), 0);
    EXPECT_FALSE(fs::exists(tier->entry_path(1)));
    EXPECT_EQ(tier->read(1).status().code(), ErrorCode::kvcache_tier_miss);
    EXPECT_TRUE(tier->read(2).ok());
    EXPECT_EQ(tier->stats().n_expired, 1);
  }
  *now += 100;  // entry 3 expired while no server ran
  auto restarted = std::move(DiskTier::open(cfg)).value();
  restarted->wait_for_scan();
  EXPECT_EQ(restarted->stats().n_entries, 1);
  EXPECT_EQ(restarted->stats().n_expired, 1);
  EXPECT_FALSE(fs::exists(restarted->entry_path(3)));
  EXPECT_TRUE(restarted->read(2).ok());
  restarted.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds
