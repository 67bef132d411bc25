// cluster/pd's pieces without processes: the transit tier (the outbox), the pool
// index kept from KV events, the transfer keys, which must be the engine's own chain hashes, the
// landing region's block allocation (with quarantine), the transfer slots' reuse, and where a
// transfer's writes land in a same-host decode server's shared pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "cluster/pd/landing_region.h"
#include "cluster/pd/page_writes.h"
#include "cluster/pd/pd_identity.h"
#include "cluster/pd/pool_index.h"
#include "cluster/pd/state_pages.h"
#include "cluster/pd/transfer_slots.h"
#include "cluster/pd/transit_tier.h"
#include "kvcache/kv_cache_manager.h"
#include "kvcache/tier_key.h"

namespace ds::pd {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TierEntry entry(uint64_t key, size_t bytes) {
  TierEntry e;
  e.key = key;
  e.tokens = {1, 2, 3};
  e.bytes.assign(bytes, std::byte{static_cast<unsigned char>(key)});
  return e;
}

TEST(TransitTier, OutboxTakeAllWaitsForEveryKeyAndRemovesThem) {
  auto outbox = std::make_shared<TransitTier>(TransitTierConfig{.name = "pd-outbox"});
  ASSERT_TRUE(outbox->write(entry(1, 8)).ok());
  // Key 2 is missing: a bounded wait, then nothing is taken.
  EXPECT_FALSE(outbox->take_all({1, 2}, steady_clock::now() + milliseconds(30)).has_value());
  EXPECT_EQ(outbox->n_entries(), 1);
  std::thread writer([outbox] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(outbox->write(entry(2, 8)).ok());
  });
  std::optional<std::vector<TierEntry>> both =
      outbox->take_all({1, 2}, steady_clock::now() + std::chrono::seconds(10));
  writer.join();
  ASSERT_TRUE(both.has_value());
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].key, 1u);
  EXPECT_EQ((*both)[1].key, 2u);
  EXPECT_EQ(outbox->n_entries(), 0);
  EXPECT_EQ(outbox->bytes_held(), 0);
}

TEST(TransitTier, OutboxKeepsOnlyWhatATransferExpects) {
  TransitTier outbox({.name = "pd-outbox", .only_expected = true});
  ASSERT_TRUE(outbox.write(entry(1, 8)).ok());  // a client request's block: not kept
  EXPECT_EQ(outbox.n_entries(), 0);
  outbox.expect({1, 2});
  outbox.expect({2});  // a second transfer sharing a prefix block
  ASSERT_TRUE(outbox.write(entry(1, 8)).ok());
  EXPECT_EQ(outbox.n_entries(), 1);
  outbox.unexpect({1, 2});
  ASSERT_TRUE(outbox.write(entry(2, 8)).ok());  // still expected by the second transfer
  EXPECT_TRUE(outbox.contains(2));
  outbox.unexpect({2});
  outbox.drop({1, 2});
  ASSERT_TRUE(outbox.write(entry(2, 8)).ok());  // late: nobody waits for it any more
  EXPECT_EQ(outbox.n_entries(), 0);
}

TEST(TransitTier, EvictsTheOldestBeyondItsCapacity) {
  TransitTier t({.name = "t", .max_bytes = 32});
  for (uint64_t k = 1; k <= 5; ++k) ASSERT_TRUE(t.write(entry(k, 10)).ok());
  EXPECT_EQ(t.n_entries(), 3);
  EXPECT_FALSE(t.contains(1));
  EXPECT_FALSE(t.contains(2));
  EXPECT_TRUE(t.contains(5));
  EXPECT_EQ(t.stats().n_evictions, 2);
  EXPECT_LE(t.bytes_held(), 32);
}

TEST(PoolIndex, FollowsStoredRemovedAndCleared) {
  PoolIndex pool;
  KvCacheEvent stored;
  stored.kind = KvCacheEvent::Kind::stored;
  stored.block_hashes = {10, 11, 12};
  pool.apply({stored});
  const std::vector<uint64_t> keys = {10, 11, 12, 13};
  EXPECT_EQ(pool.count_prefix(keys), 3);
  KvCacheEvent removed;
  removed.kind = KvCacheEvent::Kind::removed;
  removed.block_hashes = {11};
  pool.apply({removed});
  EXPECT_EQ(pool.count_prefix(keys), 1);
  KvCacheEvent cleared;
  cleared.kind = KvCacheEvent::Kind::all_cleared;
  pool.apply({cleared});
  EXPECT_EQ(pool.count_prefix(keys), 0);
}

// Both servers name a block by the engine's chain hash under the tier seed; the decode server computes
// the keys itself, so they must be exactly what its KvCacheManager computes.
TEST(PdIdentity, TransferKeysAreTheEnginesChainHashesBeforeTheLastToken) {
  PdIdentity id;
  id.secret = "0123456789abcdef0123456789abcdef";
  id.namespace_id = 0xfeedbeef;
  id.block_size_tokens = 16;
  std::vector<std::byte> secret_bytes;
  for (char c : id.secret) secret_bytes.push_back(static_cast<std::byte>(c));
  KvCacheManagerConfig cfg;
  cfg.block_size_tokens = 16;
  cfg.n_blocks = 8;
  cfg.process_seed = tier_prefix_seed(secret_bytes, id.namespace_id);
  const KvCacheManager kv(cfg);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(100 + i * 7);
  // 48 tokens = 3 full blocks, but the last token is always computed: 2 blocks move.
  const std::vector<uint64_t> keys = id.transfer_keys(tokens, "tenant-a");
  EXPECT_EQ(keys, kv.chain_hashes(tokens, "tenant-a", 2));
  EXPECT_EQ(id.prompt_block_keys(tokens, "tenant-a"), kv.chain_hashes(tokens, "tenant-a", 3));
  tokens.push_back(5);
  EXPECT_EQ(id.transfer_keys(tokens, "tenant-a"), kv.chain_hashes(tokens, "tenant-a", 3));
  EXPECT_NE(id.transfer_keys(tokens, "tenant-b"), kv.chain_hashes(tokens, "tenant-a", 3));
  EXPECT_TRUE(id.transfer_keys(std::vector<int32_t>(16, 1), "").empty());
}

TEST(PdRole, ParsesTheThreeRoles) {
  EXPECT_EQ(*parse_pd_role("prefill"), PdRole::prefill);
  EXPECT_EQ(*parse_pd_role("decode"), PdRole::decode);
  EXPECT_EQ(*parse_pd_role("both"), PdRole::both);
  Result<PdRole> bad = parse_pd_role("router");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--role router"), std::string::npos);
}

TEST(LandingRegion, AllocatesLowestFirstAndQuarantinesUntilTheDeadline) {
  LandingRegion region(256, 8);
  EXPECT_EQ(region.bytes(), 2048u);
  std::optional<std::vector<uint32_t>> a = region.allocate(3);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (std::vector<uint32_t>{0, 1, 2}));
  std::optional<std::vector<uint32_t>> b = region.allocate(4);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<uint32_t>{3, 4, 5, 6}));
  EXPECT_FALSE(region.allocate(2)) << "only one block is free";
  EXPECT_EQ(region.block(3), region.data() + 3 * 256);
  region.release(*a);
  EXPECT_EQ(region.n_free(), 4u);
  // A failed transfer's blocks are not handed out again before their quarantine ends.
  region.quarantine(*b, steady_clock::now() + milliseconds(150));
  EXPECT_EQ(region.n_quarantined(), 4u);
  EXPECT_FALSE(region.allocate(5));
  std::this_thread::sleep_for(milliseconds(200));
  std::optional<std::vector<uint32_t>> c = region.allocate(8);
  ASSERT_TRUE(c) << "the quarantine ended";
  EXPECT_EQ(region.n_quarantined(), 0u);
}

TEST(TransferSlots, ReusesIdleSlotsAndMakesOneOnlyWhenAllAreBusy) {
  int made = 0;
  std::atomic<int> idle_calls{0};
  TransferSlots slots(
      [&]() -> Result<std::unique_ptr<TransferSlot>> {
        ++made;
        return std::make_unique<TransferSlot>();
      },
      [&](TransferSlot&) { idle_calls.fetch_add(1); }, 2);
  ASSERT_TRUE(slots.prewarm(1).ok());
  EXPECT_EQ(made, 1);
  TransferSlot* first = nullptr;
  for (int i = 0; i < 3; ++i) {
    Result<TransferSlots::Checkout> c = slots.checkout();
    ASSERT_TRUE(c.ok());
    if (first == nullptr) first = &**c;
    EXPECT_EQ(&**c, first) << "a sequential transfer gets the same slot";
  }
  EXPECT_EQ(made, 1);
  {
    Result<TransferSlots::Checkout> a = slots.checkout();
    Result<TransferSlots::Checkout> b = slots.checkout();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NE(&**a, &**b);
    EXPECT_EQ(made, 2);
    EXPECT_EQ(slots.checkout().status().code(), ErrorCode::engine_overloaded);
  }
  EXPECT_EQ(slots.n_slots(), 2);
  // Idle slots are progressed by the janitor.
  for (auto until = steady_clock::now() + std::chrono::seconds(5);
       idle_calls.load() == 0 && steady_clock::now() < until;)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GT(idle_calls.load(), 0);
}

TEST(StatePages, RoundTripAcrossPagesAndRefuseWhatDoesNotFit) {
  EXPECT_EQ(state_pages_for(0, 64), 0);
  EXPECT_EQ(state_pages_for(56, 64), 1);  // 8-byte count + 56 bytes
  EXPECT_EQ(state_pages_for(57, 64), 2);
  std::vector<std::byte> state(150);
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<std::byte>(i * 7 + 3);
  Result<std::vector<std::vector<std::byte>>> pages = pack_state_pages(state, 64, state_pages_for(150, 64));
  ASSERT_TRUE(pages.ok()) << pages.status().to_string();
  ASSERT_EQ(pages->size(), 3u);
  std::vector<const std::byte*> at;
  for (const auto& p : *pages) {
    ASSERT_EQ(p.size(), 64u);
    at.push_back(p.data());
  }
  Result<std::vector<std::byte>> back = unpack_state_pages(at, 64, 150);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, state);
  // A count above what this server's model exports, or beyond the pages: refused.
  EXPECT_EQ(unpack_state_pages(at, 64, 149).status().code(), ErrorCode::transport_bad_message);
  EXPECT_EQ(unpack_state_pages(std::span(at).first(2), 64, 1000).status().code(),
            ErrorCode::transport_bad_message);
  EXPECT_EQ(pack_state_pages(state, 64, 2).status().code(), ErrorCode::transport_peer_mismatch);
}

// The decode side's pool as two page arrays (a V3-like layer-major pool: one allocation per array
// here) and a landing region for state pages, all in a shared segment; the prefill side maps it and
// writes a request's blocks and state through PageWrites. Every page lands in its granted pool block
// of its array, nothing else is touched, and no UCX put is made.
TEST(PageWrites, BlocksAndStateLandInTheGrantedPagesOfASharedPool) {
  Result<std::shared_ptr<transport::SharedPageMemory>> memory =
      transport::SharedPageMemory::create("pd-unit");
  ASSERT_TRUE(memory.ok()) << memory.status().to_string();
  constexpr size_t kBlocks = 16;
  const size_t page_a = 96, page_b = 160;  // a block's bytes: its page in array a, then in array b
  PageBuffer array_a(*memory, kBlocks * page_a), array_b(*memory, kBlocks * page_b),
      landing(*memory, 4 * 256);
  for (PageBuffer* b : {&array_a, &array_b, &landing}) std::memset(b->data(), 0xEE, b->bytes());

  transport::KvGrant grant;
  for (PageBuffer* b : {&array_a, &array_b, &landing})
    grant.regions.push_back({reinterpret_cast<uint64_t>(b->data()), b->bytes(), ""});
  grant.arrays = {{reinterpret_cast<uint64_t>(array_a.data()), page_a},
                  {reinterpret_cast<uint64_t>(array_b.data()), page_b}};
  grant.n_blocks = kBlocks;
  grant.block_ids = {3, 4, 5, 9, 2};  // a run of 3, then two single blocks
  grant.state_page_bytes = 256;
  grant.state_pages = {reinterpret_cast<uint64_t>(landing.data()) + 2 * 256};
  grant.shared = (*memory)->ref();
  grant.shared_ranges = (*memory)->ranges();
  Result<std::unique_ptr<transport::SharedPageMapping>> mapping =
      transport::SharedPageMapping::open(*grant.shared);
  ASSERT_TRUE(mapping.ok()) << mapping.status().to_string();

  // Never used: every write lies in the shared segment.
  Result<std::unique_ptr<transport::UcxWorker>> worker = transport::UcxWorker::create();
  ASSERT_TRUE(worker.ok()) << worker.status().to_string();
  transport::UcxEndpoint no_peer(**worker, nullptr);
  const std::vector<transport::RemoteKey> no_keys(grant.regions.size());
  std::vector<std::byte> staging(1024);
  PageWrites writes(no_peer, grant, no_keys, staging, mapping->get(),
                    steady_clock::now() + milliseconds(5000));

  std::vector<TierEntry> blocks(grant.block_ids.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    blocks[k].bytes.resize(page_a + page_b);
    for (size_t i = 0; i < blocks[k].bytes.size(); ++i)
      blocks[k].bytes[i] = static_cast<std::byte>(k * 41 + i * 7 + 1);
  }
  // (The staging size caps the runs of staged puts only; these writes are copies.)
  ASSERT_TRUE(write_blocks(writes, 400, blocks, grant.block_ids, grant).ok());
  const std::vector<std::vector<std::byte>> state = {std::vector<std::byte>(256, std::byte{0x42})};
  ASSERT_TRUE(write_state(writes, state, grant).ok());
  ASSERT_TRUE(writes.finish().ok());
  EXPECT_EQ(writes.puts(), 0);
  EXPECT_EQ(writes.shared_bytes(), static_cast<int64_t>(blocks.size() * (page_a + page_b) + 256));

  for (size_t id = 0; id < kBlocks; ++id) {
    const auto granted = std::find(grant.block_ids.begin(), grant.block_ids.end(), id);
    const std::byte* a = array_a.data() + id * page_a;
    const std::byte* b = array_b.data() + id * page_b;
    if (granted == grant.block_ids.end()) {
      EXPECT_EQ(a[0], std::byte{0xEE}) << id;
      EXPECT_EQ(b[page_b - 1], std::byte{0xEE}) << id;
      continue;
    }
    const TierEntry& e = blocks[static_cast<size_t>(granted - grant.block_ids.begin())];
    EXPECT_EQ(std::memcmp(a, e.bytes.data(), page_a), 0) << "array a, block " << id;
    EXPECT_EQ(std::memcmp(b, e.bytes.data() + page_a, page_b), 0) << "array b, block " << id;
  }
  EXPECT_EQ(landing.data()[2 * 256], std::byte{0x42});
  EXPECT_EQ(landing.data()[3 * 256 - 1], std::byte{0x42});
  EXPECT_EQ(landing.data()[2 * 256 - 1], std::byte{0xEE});
  EXPECT_EQ(landing.data()[3 * 256], std::byte{0xEE});

  // A block of another size is refused before anything is written.
  blocks[1].bytes.pop_back();
  EXPECT_EQ(write_blocks(writes, 400, blocks, grant.block_ids, grant).code(), ErrorCode::internal);
}

}  // namespace
}  // namespace ds::pd
