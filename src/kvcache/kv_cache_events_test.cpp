// KvCacheManager's events (KV events, docs/kvcache.md): replaying stored / removed / all_cleared
// events must give exactly the set of hashes the index holds after every operation of a random
// workload (evictions and forget() included), and every stored run must be a true hash chain of its
// tokens under its sequence's salt.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kvcache/kv_cache_manager.h"
#include "kvcache/prefix_hash.h"

namespace ds {
namespace {

constexpr uint64_t kSeed = 0x5eed;
constexpr int32_t kBlock = 4;

TEST(KvCacheEvents, ReplayEqualsTheIndexThroughARandomWorkload) {
  KvCacheManagerConfig cfg;
  cfg.block_size_tokens = kBlock;
  cfg.n_blocks = 24;
  cfg.process_seed = kSeed;
  cfg.record_events = true;
  KvCacheManager kv(cfg);
  std::mt19937 rng(7);
  std::vector<std::vector<TokenId>> families(3, std::vector<TokenId>(10 * kBlock));
  for (auto& f : families)
    for (TokenId& t : f) t = static_cast<TokenId>(rng() % 40);
  const std::vector<std::string> salts = {"", "tenant-a"};
  std::map<SeqId, std::string> salt_of;  // every sequence ever opened
  std::map<SeqId, std::vector<TokenId>> open;
  std::set<uint64_t> replayed;
  int64_t n_stored = 0, n_removed = 0, n_cleared = 0;
  SeqId next = 1;

  auto replay = [&](int op) {
    for (const KvCacheEvent& ev : kv.take_events()) {
      if (ev.kind == KvCacheEvent::Kind::stored) {
        ++n_stored;
        ASSERT_FALSE(ev.block_hashes.empty());
        ASSERT_EQ(ev.token_ids.size(), ev.block_hashes.size() * kBlock) << "op " << op;
        const uint64_t key = prefix_hash_key(kSeed, salt_of.at(ev.seq_id));
        uint64_t prev = ev.parent_hash.value_or(0);
        for (size_t i = 0; i < ev.block_hashes.size(); ++i) {
          const std::span<const TokenId> block(ev.token_ids.data() + i * kBlock, kBlock);
          prev = hash_block(key, prev, block);
          EXPECT_EQ(prev, ev.block_hashes[i]) << "stored run is a hash chain, op " << op;
          EXPECT_TRUE(replayed.insert(ev.block_hashes[i]).second) << "stored twice, op " << op;
        }
      } else if (ev.kind == KvCacheEvent::Kind::removed) {
        ++n_removed;
        for (const uint64_t h : ev.block_hashes)
          EXPECT_EQ(replayed.erase(h), 1u) << "removed unknown, op " << op;
      } else {
        ++n_cleared;
        replayed.clear();
      }
    }
    const std::vector<uint64_t> held = kv.cached_hashes();
    ASSERT_EQ(replayed, std::set<uint64_t>(held.begin(), held.end())) << "op " << op;
  };

  for (int op = 0; op < 4000; ++op) {
    const int choice = static_cast<int>(rng() % 20);
    if (choice < 7 || open.empty()) {
      std::vector<TokenId> prompt = families[rng() % families.size()];
      prompt.resize(1 + rng() % prompt.size());
      if (rng() % 3 == 0) prompt[rng() % prompt.size()] = static_cast<TokenId>(100 + rng() % 500);
      const std::string& salt = salts[rng() % salts.size()];
      salt_of[next] = salt;
      (void)kv.open(next, prompt, salt);
      if (kv.grow(next, static_cast<int64_t>(prompt.size())).ok()) {
        open[next] = prompt;
      } else {
        kv.close(next);
      }
      ++next;
    } else if (choice < 14) {
      auto it = std::next(open.begin(), static_cast<std::ptrdiff_t>(rng() % open.size()));
      kv.commit(it->first, it->second);
    } else if (choice < 19) {
      auto it = std::next(open.begin(), static_cast<std::ptrdiff_t>(rng() % open.size()));
      kv.commit(it->first, it->second);
      kv.close(it->first);
      open.erase(it);
    } else if (rng() % 2 == 0) {
      const std::vector<uint64_t> held = kv.cached_hashes();
      if (!held.empty()) {
        int32_t in_use = 0;
        const uint64_t h = held[rng() % held.size()];
        const int32_t dropped = kv.forget(std::span<const uint64_t>(&h, 1), &in_use);
        EXPECT_EQ(dropped + in_use, 1);
      }
    } else {
      int32_t in_use = 0;
      (void)kv.forget_all(&in_use);
    }
    replay(op);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(kv.check_integrity().ok()) << "op " << op;
  }
  EXPECT_GT(n_stored, 100);
  EXPECT_GT(n_removed, 50) << "evictions and forgets happened";
  EXPECT_GT(n_cleared, 0) << "forget_all with nothing in use";
  EXPECT_GT(kv.stats().n_evictions, 20);
}

TEST(KvCacheEvents, OffByDefault) {
  KvCacheManagerConfig cfg;
  cfg.block_size_tokens = kBlock;
  cfg.n_blocks = 8;
  KvCacheManager kv(cfg);
  const std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  (void)kv.open(1, prompt, "");
  ASSERT_TRUE(kv.grow(1, 9).ok());
  kv.commit(1, prompt);
  EXPECT_EQ(kv.cached_hashes().size(), 2u);
  EXPECT_TRUE(kv.take_events().empty());
}

}  // namespace
}  // namespace ds
