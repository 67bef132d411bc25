// KV event decoding (payloads written here with msgpuck, in the publisher's layout: docs/kvcache.md)
// and KvEventIndex: what the events say a worker holds is what the prefix index matches.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <msgpuck.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cluster/router/kv_event_decoding.h"
#include "cluster/router/kv_event_index.h"
#include "cluster/router/prefix_index.h"
#include "cluster/router/testing/kv_event_pack.h"

namespace ds::cluster {
namespace {

constexpr int kBlock = 4;
using testing::Pack;
using testing::removed;
using testing::stored;  // block size 4 unless given

WorkerKvEventBatch decode(const Pack& p) {
  Result<WorkerKvEventBatch> b = decode_kv_event_batch(p.bytes());
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(b).value() : WorkerKvEventBatch{};
}

std::vector<int32_t> ids(int first, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

TEST(KvEventDecoding, ReadsThePublishersLayoutAndSkipsWhatItDoesNotKnow) {
  Pack p;
  p.array(2).f64(1700000000.5).array(5);
  stored(p, {11, 12}, std::nullopt, ids(100, 8));
  stored(p, {13}, 12, ids(200, 4));
  p.map(2).str("type").str("SomethingNew").str("x").uint(1);  // a newer publisher's event
  removed(p, {11});
  p.map(1).str("type").str("AllBlocksCleared");
  const WorkerKvEventBatch b = decode(p);
  EXPECT_DOUBLE_EQ(b.ts_unix_s, 1700000000.5);
  ASSERT_EQ(b.events.size(), 4u);
  EXPECT_EQ(b.events[0].kind, WorkerKvEvent::Kind::stored);
  EXPECT_EQ(b.events[0].block_hashes, (std::vector<uint64_t>{11, 12}));
  EXPECT_FALSE(b.events[0].parent_hash.has_value());
  EXPECT_EQ(b.events[0].token_ids, ids(100, 8));
  EXPECT_EQ(b.events[0].block_size, kBlock);
  EXPECT_EQ(b.events[1].parent_hash, std::optional<uint64_t>(12));
  EXPECT_EQ(b.events[2].kind, WorkerKvEvent::Kind::removed);
  EXPECT_EQ(b.events[2].block_hashes, (std::vector<uint64_t>{11}));
  EXPECT_EQ(b.events[3].kind, WorkerKvEvent::Kind::all_cleared);
}

TEST(KvEventDecoding, RefusesMalformedPayloadsWithTheReason) {
  Pack good;
  good.array(2).f64(1).array(1);
  stored(good, {1, 2}, std::nullopt, ids(0, 8));
  const std::string& bytes = good.bytes();
  for (size_t n = 0; n < bytes.size(); ++n)  // every truncation
    EXPECT_FALSE(decode_kv_event_batch(std::string_view(bytes).substr(0, n)).ok()) << n;
  Pack short_ids;
  short_ids.array(2).f64(1).array(1);
  stored(short_ids, {1, 2}, std::nullopt, ids(0, 7));
  Result<WorkerKvEventBatch> r = decode_kv_event_batch(short_ids.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("block_size ids per block"), std::string::npos) << r.status().message();
  Pack not_batch;
  not_batch.map(0);
  EXPECT_FALSE(decode_kv_event_batch(not_batch.bytes()).ok());
  Pack untyped;
  untyped.array(2).f64(1).array(1).map(1).str("block_hashes").uints({1});
  EXPECT_FALSE(decode_kv_event_batch(untyped.bytes()).ok());
}

// Random byte flips of a valid batch: each decodes or is refused, and a decoded stored event always
// has block_size ids per block (what KvEventIndex relies on to slice the ids).
TEST(KvEventDecoding, MutatedPayloadsDecodeConsistentlyOrAreRefused) {
  Pack good;
  good.array(2).f64(1).array(3);
  stored(good, {1, 2}, 7, ids(0, 8));
  removed(good, {1});
  good.map(1).str("type").str("AllBlocksCleared");
  std::mt19937 rng(11);
  size_t refused = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bytes = good.bytes();
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
      bytes[rng() % bytes.size()] = static_cast<char>(rng() % 256);
    Result<WorkerKvEventBatch> r = decode_kv_event_batch(bytes);
    if (!r.ok()) {
      ++refused;
      continue;
    }
    for (const WorkerKvEvent& ev : r->events) {
      if (ev.kind != WorkerKvEvent::Kind::stored) continue;
      ASSERT_GT(ev.block_size, 0);
      ASSERT_EQ(ev.token_ids.size(), ev.block_hashes.size() * static_cast<size_t>(ev.block_size));
    }
  }
  EXPECT_GT(refused, 0u);
}

// What a request with `prompt` would match on worker 0.
size_t matched(const PrefixIndex& index, const std::vector<int32_t>& prompt) {
  return index.match(block_hashes(prompt, kBlock), 1)[0];
}

TEST(KvEventIndex, StoredRunsChainThroughTheirParentsAndRemovalsCount) {
  PrefixIndex index(1000);
  KvEventIndex events(index, kBlock);
  const std::vector<int32_t> prompt = ids(500, 16);  // 4 blocks
  // The worker stores blocks 0-1, then 2-3 as a run whose parent is its (opaque) hash of block 1.
  Pack p1;
  p1.array(2).f64(0).array(1);
  stored(p1, {0xa0, 0xa1}, std::nullopt, ids(500, 8));
  KvEventApplyCounts c = events.apply(0, decode(p1));
  EXPECT_EQ(c.blocks_stored, 2u);
  EXPECT_EQ(matched(index, prompt), 2u);
  Pack p2;
  p2.array(2).f64(0).array(1);
  stored(p2, {0xa2, 0xa3}, 0xa1, ids(508, 8));
  events.apply(0, decode(p2));
  EXPECT_EQ(matched(index, prompt), 4u);
  // Evicting block 2 leaves the prefix up to block 1 (block 3 is held but not reachable).
  Pack p3;
  p3.array(2).f64(0).array(1);
  removed(p3, {0xa2, 0xdead});  // a hash never stored is ignored
  c = events.apply(0, decode(p3));
  EXPECT_EQ(c.blocks_removed, 1u);
  EXPECT_EQ(matched(index, prompt), 2u);
  EXPECT_EQ(events.n_worker_blocks(0), 3u);
  // Another worker's index is untouched.
  EXPECT_EQ(index.match(block_hashes(prompt, kBlock), 2)[1], 0u);
  Pack p4;
  p4.array(2).f64(0).array(1).map(1).str("type").str("AllBlocksCleared");
  EXPECT_EQ(events.apply(0, decode(p4)).cleared, 1u);
  EXPECT_EQ(matched(index, prompt), 0u);
  EXPECT_EQ(events.n_worker_blocks(0), 0u);
}

TEST(KvEventIndex, TwinBlocksUnderTwoSaltsLeaveTogetherAndUnplaceableRunsAreDropped) {
  PrefixIndex index(1000);
  KvEventIndex events(index, kBlock);
  const std::vector<int32_t> prompt = ids(7, 8);
  Pack p;
  p.array(2).f64(0).array(4);
  stored(p, {1, 2}, std::nullopt, prompt);     // salt A
  stored(p, {3, 4}, std::nullopt, prompt);     // salt B: same tokens, other worker hashes
  stored(p, {5}, 999, ids(0, 4));              // parent never seen
  stored(p, {6}, std::nullopt, ids(0, 8), 8);  // the worker's block size is not the router's
  const KvEventApplyCounts c = events.apply(0, decode(p));
  EXPECT_EQ(c.blocks_stored, 4u);
  EXPECT_EQ(c.blocks_dropped, 2u);
  EXPECT_EQ(matched(index, prompt), 2u);
  Pack r1;
  r1.array(2).f64(0).array(1);
  removed(r1, {1, 2});
  events.apply(0, decode(r1));
  EXPECT_EQ(matched(index, prompt), 2u);  // salt B's twins still hold the tokens
  Pack r2;
  r2.array(2).f64(0).array(1);
  removed(r2, {3});
  events.apply(0, decode(r2));
  EXPECT_EQ(matched(index, prompt), 0u);
  events.clear(0);
  EXPECT_EQ(events.n_worker_blocks(0), 0u);
}

TEST(KvEventIndex, ASaltedRunMatchesOnlyPromptsUnderTheSameSalt) {
  PrefixIndex index(1000);
  KvEventIndex events(index, kBlock);
  const std::vector<int32_t> prompt = ids(7, 12);
  const uint64_t tag = salt_tag_of("tenant-a");
  Pack p;
  p.array(2).f64(0).array(2);
  stored_salted(p, {1, 2}, std::vector<int32_t>(prompt.begin(), prompt.begin() + 8),
                fmt::format("salt_tag:{:016x}", tag));
  stored(p, {3}, 2,
         std::vector<int32_t>(prompt.begin() + 8, prompt.end()));  // its child: salted via the parent
  const WorkerKvEventBatch b = decode(p);
  EXPECT_EQ(b.events[0].salt_tag, std::optional<uint64_t>(tag));
  EXPECT_FALSE(b.events[1].salt_tag.has_value());
  EXPECT_EQ(events.apply(0, b).blocks_stored, 3u);
  auto match_under = [&](std::optional<uint64_t> salt) {
    return index.match(block_hashes(prompt, kBlock, root_block_hash(salt)), 1)[0];
  };
  EXPECT_EQ(match_under(tag), 3u);
  EXPECT_EQ(match_under(std::nullopt), 0u);             // the unsalted prompt shares nothing
  EXPECT_EQ(match_under(salt_tag_of("tenant-b")), 0u);  // nor does another tenant
  EXPECT_NE(root_block_hash(tag), root_block_hash(std::nullopt));
  EXPECT_EQ(root_block_hash(std::nullopt), kRootBlockHash);  // unsalted hashes are unchanged

  // Keys the router does not know are skipped; a salt tag that is not 16 hex digits is refused.
  Pack other;
  other.array(2).f64(0).array(1);
  stored_salted(other, {9}, ids(50, 4), "lora:foo");
  EXPECT_FALSE(decode(other).events[0].salt_tag.has_value());
  for (const char* bad : {"salt_tag:12", "salt_tag:zzzzzzzzzzzzzzzz", "salt_tag:00000000000000001"}) {
    Pack q;
    q.array(2).f64(0).array(1);
    stored_salted(q, {9}, ids(50, 4), bad);
    Result<WorkerKvEventBatch> r = decode_kv_event_batch(q.bytes());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("salt_tag"), std::string::npos);
  }
}

// A random workload against a reference: prompts sharing prefixes are stored run by run (only the
// blocks not yet held, chained to the last held one, as the engine's commit does), random blocks are
// evicted; after every batch, each prompt's match is its leading run of held blocks.
TEST(KvEventIndex, RandomWorkloadMatchesTheReference) {
  std::mt19937 rng(7);
  PrefixIndex index(1 << 16);
  KvEventIndex events(index, kBlock);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p = i > 0 && rng() % 2 ? prompts[rng() % prompts.size()] : std::vector<int32_t>{};
    p.resize(p.size() / 2 / kBlock * kBlock);  // keep a random-length shared prefix
    while (p.size() < 40) p.push_back(static_cast<int32_t>(rng() % 50));
    prompts.push_back(p);
  }
  std::map<std::vector<int32_t>, uint64_t> held;  // token prefix (whole blocks) -> worker hash
  uint64_t next_hash = 1;
  for (int step = 0; step < 400; ++step) {
    Pack p;
    const bool store = rng() % 3 != 0;
    if (store) {
      const auto& prompt = prompts[rng() % prompts.size()];
      std::vector<uint64_t> hashes;
      std::vector<int32_t> run_ids;
      std::optional<uint64_t> parent;
      for (size_t end = kBlock; end <= prompt.size(); end += kBlock) {
        std::vector<int32_t> prefix(prompt.begin(), prompt.begin() + static_cast<long>(end));
        if (auto it = held.find(prefix); it != held.end()) {
          if (!hashes.empty()) break;  // the engine commits one contiguous new run per request
          parent = it->second;
          continue;
        }
        std::vector<int32_t> before(prompt.begin(), prompt.begin() + static_cast<long>(end - kBlock));
        if (end > kBlock && !held.contains(before)) break;  // its parent is gone: a fresh prefill starts at 0
        hashes.push_back(next_hash);
        held[prefix] = next_hash++;
        run_ids.insert(run_ids.end(), prefix.end() - kBlock, prefix.end());
      }
      if (hashes.empty()) continue;
      p.array(2).f64(0).array(1);
      stored(p, hashes, parent, run_ids);
    } else {
      if (held.empty()) continue;
      auto it = held.begin();
      std::advance(it, static_cast<long>(rng() % held.size()));
      p.array(2).f64(0).array(1);
      removed(p, {it->second});
      held.erase(it);
    }
    events.apply(0, decode(p));
    for (const auto& prompt : prompts) {
      size_t want = 0;
      for (size_t end = kBlock; end <= prompt.size(); end += kBlock, ++want)
        if (!held.contains(std::vector<int32_t>(prompt.begin(), prompt.begin() + static_cast<long>(end))))
          break;
      ASSERT_EQ(matched(index, prompt), want) << "step " << step;
    }
  }
  EXPECT_EQ(events.n_worker_blocks(0), held.size());
}

}  // namespace
}  // namespace ds::cluster
