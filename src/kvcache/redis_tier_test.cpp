// RedisTier against a real redis-server the test starts on a free loopback port: round trip,
// two clients sharing one server (B reads what A wrote), namespaces, a corrupt value is a miss
// and deleted, the TTL is set, and a killed server makes the tier answer at once (down) and
// recover after the retry interval once Redis is back.
#include "kvcache/redis_tier.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "kvcache/testing/redis_server.h"

namespace ds {
namespace {

TierEntry make_entry(uint64_t key, size_t n_bytes) {
  TierEntry e;
  e.key = key;
  e.prev_key = key - 1;
  e.tokens = {1, 2, 3, static_cast<int32_t>(key)};
  std::mt19937 rng(static_cast<uint32_t>(key));
  e.bytes.resize(n_bytes);
  for (std::byte& b : e.bytes) b = static_cast<std::byte>(rng());
  return e;
}

std::unique_ptr<RedisTier> open_tier(const std::string& url, uint64_t ns = 5) {
  Result<std::unique_ptr<RedisTier>> t = RedisTier::open({.url = url,
                                                          .namespace_id = ns,
                                                          .ttl_s = 600,
                                                          .lookup_timeout_ms = 200,
                                                          .io_timeout_ms = 500,
                                                          .retry_after_ms = 100});
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

redisReply* command(int port, const std::string& cmd) {
  redisContext* c = redisConnect("127.0.0.1", port);
  auto* r = static_cast<redisReply*>(redisCommand(c, cmd.c_str()));
  redisFree(c);
  return r;
}

TEST(RedisTier, TwoClientsShareEntriesAndNamespacesStayApart) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  auto a = open_tier(redis.url());
  auto b = open_tier(redis.url());
  for (uint64_t key = 10; key < 13; ++key) ASSERT_TRUE(a->write(make_entry(key, 100000)).ok());
  const uint64_t keys[] = {10, 11, 12, 13};
  EXPECT_EQ(b->count_prefix(keys), 3);
  Result<TierEntry> got = b->read(11);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->bytes == make_entry(11, 100000).bytes);
  EXPECT_EQ(got->tokens, make_entry(11, 1).tokens);
  EXPECT_EQ(b->read(13).status().code(), ErrorCode::kvcache_tier_miss);
  auto over_unix = open_tier(redis.unix_url());
  EXPECT_EQ(over_unix->count_prefix(keys), 3);
  EXPECT_TRUE(over_unix->read(12).ok());
  auto other_model = open_tier(redis.url(), 6);
  EXPECT_EQ(other_model->count_prefix(keys), 0);

  redisReply* ttl = command(redis.port(), "TTL " + a->redis_key(10));
  ASSERT_NE(ttl, nullptr);
  EXPECT_GT(ttl->integer, 500);
  EXPECT_LE(ttl->integer, 600);
  freeReplyObject(ttl);

  // A value that is not an entry: a miss, and deleted.
  freeReplyObject(command(redis.port(), "SET " + a->redis_key(20) + " garbage"));
  EXPECT_EQ(b->read(20).status().code(), ErrorCode::kvcache_tier_corrupt);
  EXPECT_FALSE(b->contains(20));
  EXPECT_EQ(b->stats().n_corrupt, 1);
}

TEST(RedisTier, RemoveMatchingScansEveryPageOfTheNamespace) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  auto a = open_tier(redis.url());
  auto other_model = open_tier(redis.url(), 6);
  // More entries than one SCAN page (COUNT 256), two tenants.
  for (uint64_t key = 1; key <= 300; ++key) {
    TierEntry e = make_entry(key, 64);
    e.scope = {tier_salt_tag(key % 3 == 0 ? "t2" : "t1"), key % 2 == 0 ? "conv/even" : "conv/odd"};
    ASSERT_TRUE(a->write(e).ok());
  }
  TierEntry foreign = make_entry(1, 64);
  foreign.scope = {tier_salt_tag("t1"), "conv/odd"};
  ASSERT_TRUE(other_model->write(foreign).ok());

  Result<int64_t> n = a->remove_matching({tier_salt_tag("t2"), "conv/even"});  // key % 6 == 0
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 50);
  EXPECT_FALSE(a->contains(6));
  EXPECT_TRUE(a->contains(3));
  n = a->remove_matching({tier_salt_tag("t1"), std::nullopt});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 200);
  EXPECT_FALSE(a->contains(1));
  n = a->remove_matching({});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 50);
  EXPECT_EQ(a->stats().n_removed, 300);
  const uint64_t keys[] = {3};
  EXPECT_EQ(a->count_prefix(keys), 0);
  EXPECT_TRUE(other_model->contains(1)) << "another model's namespace is untouched";
}

TEST(RedisTier, BatchedLookupsAndWritesStoreEveryEntryAndSkipExpiredOnes) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  auto a = open_tier(redis.url());
  std::vector<TierEntry> entries;
  for (uint64_t key = 100; key < 140; ++key) entries.push_back(make_entry(key, 2000));
  entries[3].expires_at_unix_s = 1;  // long past: not stored
  std::vector<const TierEntry*> batch;
  for (const TierEntry& e : entries) batch.push_back(&e);
  ASSERT_TRUE(a->write_batch(batch).ok());
  EXPECT_EQ(a->stats().n_writes, 39);
  EXPECT_EQ(a->stats().write_latency.counts.size(), kTierLatencyBoundsS.size() + 1);
  int64_t observed = 0;
  for (const int64_t c : a->stats().write_latency.counts) observed += c;
  EXPECT_EQ(observed, 39) << "one latency observation per stored entry";
  const uint64_t keys[] = {99, 100, 103, 139, 140};
  EXPECT_EQ(a->contains_each(keys), (std::vector<bool>{false, true, false, true, false}));
  Result<TierEntry> got = a->read(120);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->bytes == entries[20].bytes);
}

TEST(RedisTier, ADeadServerIsSkippedAtOnceAndRetriedLater) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok());
  auto tier = open_tier(redis.url());
  ASSERT_TRUE(tier->write(make_entry(1, 1000)).ok());
  redis.kill();
  const uint64_t keys[] = {1};
  EXPECT_EQ(tier->count_prefix(keys), 0);
  EXPECT_EQ(tier->read(1).status().code(), ErrorCode::kvcache_tier_unavailable);
  EXPECT_EQ(tier->write(make_entry(2, 1000)).code(), ErrorCode::kvcache_tier_unavailable);
  EXPECT_GE(tier->stats().n_errors, 1);

  redis.start();  // same port, empty (no persistence)
  ASSERT_TRUE(redis.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past retry_after_ms
  ASSERT_TRUE(tier->write(make_entry(3, 1000)).ok());
  const uint64_t three[] = {3};
  EXPECT_EQ(tier->count_prefix(three), 1);
  EXPECT_TRUE(tier->read(3).ok());
}

TEST(RedisTier, UrlsAreChecked) {
  EXPECT_EQ(RedisTier::open({.url = "http://x"}).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(RedisTier::open({.url = "redis://host:notaport"}).status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(RedisTier::open({.url = "redis://127.0.0.1:1"}).ok()) << "connects lazily";
  EXPECT_TRUE(RedisTier::open({.url = "unix:///tmp/none.sock"}).ok());
  auto nowhere = open_tier("unix:///tmp/ds_no_such_redis.sock");
  const uint64_t keys[] = {1};
  EXPECT_EQ(nowhere->count_prefix(keys), 0);
  EXPECT_EQ(nowhere->read(1).status().code(), ErrorCode::kvcache_tier_unavailable);
}

}  // namespace
}  // namespace ds
