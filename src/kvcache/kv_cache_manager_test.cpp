#include "kvcache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ds {

struct KvCacheManagerTestAccess {
  static std::vector<BlockId>& table(KvCacheManager& kv, SeqId seq_id) { return kv.seqs_.at(seq_id).table; }
  static std::vector<uint64_t>& block_hashes(KvCacheManager& kv, SeqId seq_id) {
    return kv.seqs_.at(seq_id).block_hashes;
  }
};

namespace {

constexpr uint64_t kSeed = 0x5eed;

KvCacheManagerConfig small_config(int32_t block_size, int32_t n_blocks) {
  KvCacheManagerConfig cfg;
  cfg.block_size_tokens = block_size;
  cfg.n_blocks = n_blocks;
  cfg.process_seed = kSeed;
  return cfg;
}

std::vector<TokenId> iota_tokens(int32_t n_tokens, TokenId first) {
  std::vector<TokenId> tokens(static_cast<size_t>(n_tokens));
  for (int32_t i = 0; i < n_tokens; ++i) tokens[static_cast<size_t>(i)] = first + i;
  return tokens;
}

// Opens, computes and commits the whole prompt, then closes: the prompt's full blocks end up cached.
void compute_and_close(KvCacheManager& kv, SeqId seq_id, const std::vector<TokenId>& prompt,
                       std::string_view salt) {
  (void)kv.open(seq_id, prompt, salt);
  ASSERT_TRUE(kv.grow(seq_id, static_cast<int64_t>(prompt.size())).ok());
  kv.commit(seq_id, prompt);
  kv.close(seq_id);
}

TEST(KvCacheManagerConfig, BlockSizeMustBeAMultipleOfEveryCompressionRatio) {
  KvCacheManagerConfig cfg = small_config(128, 8);
  cfg.compression_ratios = {0, 4, 128};
  EXPECT_TRUE(cfg.validate().ok());
  cfg.block_size_tokens = 64;
  const Status bad = cfg.validate();
  EXPECT_EQ(bad.code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.message().find("128"), std::string::npos) << bad.message();
  cfg.compression_ratios = {4, 2};
  EXPECT_TRUE(cfg.validate().ok());
  cfg.block_size_tokens = 6;
  EXPECT_EQ(cfg.validate().code(), ErrorCode::invalid_argument);
  cfg.block_size_tokens = 0;
  cfg.compression_ratios.clear();
  EXPECT_EQ(cfg.validate().code(), ErrorCode::invalid_argument);
  cfg = small_config(16, -1);
  EXPECT_EQ(cfg.validate().code(), ErrorCode::invalid_argument);
}

TEST(KvCacheManager, SecondOpenOfAPromptHitsItsFullBlocksButLeavesOneTokenToCompute) {
  KvCacheManager kv(small_config(4, 16));
  const std::vector<TokenId> prompt = iota_tokens(14, 100);  // 3 full blocks + 2
  EXPECT_EQ(kv.open(1, prompt, ""), 0);
  EXPECT_EQ(kv.blocks_needed(1, 14), 4);
  ASSERT_TRUE(kv.grow(1, 14).ok());
  EXPECT_EQ(kv.block_table(1).size(), 4u);
  kv.commit(1, prompt);
  EXPECT_EQ(kv.stats().n_blocks_cached, 3);  // the partial block is never registered
  ASSERT_TRUE(kv.check_integrity().ok());

  // While seq 1 still holds them, seq 2 shares its three full blocks.
  EXPECT_EQ(kv.open(2, prompt, ""), 12);
  EXPECT_EQ(std::vector<BlockId>(kv.block_table(2)),
            std::vector<BlockId>(kv.block_table(1).begin(), kv.block_table(1).begin() + 3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(kv.block_ref_count(kv.block_table(1)[static_cast<size_t>(i)]), 2);
  ASSERT_TRUE(kv.check_integrity().ok());

  // A prompt of exactly 3 blocks may hit only 2: its last token must be computed for logits.
  const std::vector<TokenId> exact(prompt.begin(), prompt.begin() + 12);
  EXPECT_EQ(kv.open(3, exact, ""), 8);
  const KvCacheStats stats = kv.stats();
  EXPECT_EQ(stats.prefix_queries_tokens, 14 + 14 + 12);
  EXPECT_EQ(stats.prefix_hit_tokens, 12 + 8);
  kv.close(1);
  kv.close(2);
  kv.close(3);
  EXPECT_EQ(kv.n_free_blocks(), 16);
  EXPECT_EQ(kv.stats().n_blocks_cached, 3);
  ASSERT_TRUE(kv.check_integrity().ok());
}

TEST(KvCacheManager, DivergingPromptHitsOnlyTheCommonFullBlocks) {
  KvCacheManager kv(small_config(4, 16));
  const std::vector<TokenId> prompt = iota_tokens(16, 0);
  compute_and_close(kv, 1, prompt, "");
  for (int32_t changed_at = 0; changed_at < 16; ++changed_at) {
    std::vector<TokenId> edited = prompt;
    edited[static_cast<size_t>(changed_at)] = -5;
    const PrefixProbe probe = kv.probe(edited, "");
    EXPECT_EQ(probe.n_hit_tokens, std::min(changed_at / 4 * 4, 12)) << "changed at " << changed_at;
  }
}

TEST(KvCacheManager, DifferentSaltsNeverShareBlocks) {
  KvCacheManager kv(small_config(4, 32));
  const std::vector<TokenId> prompt = iota_tokens(17, 7);
  compute_and_close(kv, 1, prompt, "tenant-a");
  EXPECT_EQ(kv.open(2, prompt, "tenant-b"), 0);
  EXPECT_EQ(kv.open(3, prompt, ""), 0);
  EXPECT_EQ(kv.open(4, prompt, "tenant-a"), 16);
  ASSERT_TRUE(kv.grow(2, 17).ok());
  kv.commit(2, prompt);
  // Tenant b now has its own copy: nothing in common with tenant a's table.
  for (const BlockId block : kv.block_table(2)) {
    EXPECT_EQ(std::count(kv.block_table(4).begin(), kv.block_table(4).end(), block), 0) << block;
  }
  EXPECT_EQ(kv.stats().n_blocks_cached, 8);
  ASSERT_TRUE(kv.check_integrity().ok());
}

TEST(KvCacheManager, EvictsLeastRecentlyReleasedBlocksTailFirst) {
  // 6 blocks; three 2-block prompts fill the cache.
  KvCacheManager kv(small_config(4, 6));
  const std::vector<TokenId> a = iota_tokens(9, 1000);
  const std::vector<TokenId> b = iota_tokens(9, 2000);
  const std::vector<TokenId> c = iota_tokens(9, 3000);
  (void)kv.open(1, a, "");
  ASSERT_TRUE(kv.grow(1, 8).ok());
  kv.commit(1, std::span(a).first(8));
  const std::vector<BlockId> a_blocks = kv.block_table(1);
  kv.close(1);
  // close() releases last-first: a's tail block is reused before its head.
  EXPECT_EQ(kv.free_list().back(), a_blocks[0]);
  EXPECT_EQ(*(kv.free_list().end() - 2), a_blocks[1]);

  compute_and_close(kv, 2, std::vector<TokenId>(b.begin(), b.begin() + 8), "");
  compute_and_close(kv, 3, std::vector<TokenId>(c.begin(), c.begin() + 8), "");
  EXPECT_EQ(kv.stats().n_blocks_cached, 6);
  EXPECT_EQ(kv.probe(a, "").n_hit_tokens, 8);

  // Touch a (revive and release again): it becomes the most recently released.
  EXPECT_EQ(kv.open(4, a, ""), 8);
  EXPECT_EQ(kv.n_free_blocks(), 4);  // revived blocks left the free list
  kv.close(4);

  // A fresh 2-block sequence evicts the least recently released: b's blocks, tail first.
  (void)kv.open(5, iota_tokens(8, 9000), "");
  ASSERT_TRUE(kv.grow(5, 4).ok());
  EXPECT_EQ(kv.probe(b, "").n_hit_tokens, 4);  // b lost its second block only
  ASSERT_TRUE(kv.grow(5, 8).ok());
  EXPECT_EQ(kv.probe(b, "").n_hit_tokens, 0);
  EXPECT_EQ(kv.probe(c, "").n_hit_tokens, 8);
  EXPECT_EQ(kv.probe(a, "").n_hit_tokens, 8);
  EXPECT_EQ(kv.stats().n_evictions, 2);
  ASSERT_TRUE(kv.check_integrity().ok());
}

TEST(KvCacheManager, GrowFailureChangesNothing) {
  KvCacheManager kv(small_config(4, 3));
  (void)kv.open(1, iota_tokens(5, 0), "");
  ASSERT_TRUE(kv.grow(1, 5).ok());
  (void)kv.open(2, iota_tokens(5, 50), "");
  const Status full = kv.grow(2, 9);
  EXPECT_EQ(full.code(), ErrorCode::kvcache_out_of_blocks);
  EXPECT_EQ(full.kind(), ErrorKind::retryable);
  EXPECT_TRUE(kv.block_table(2).empty());
  EXPECT_EQ(kv.n_free_blocks(), 1);
  EXPECT_EQ(kv.blocks_needed(2, 9), 3);
  EXPECT_EQ(kv.blocks_needed(1, 5), 0);
  ASSERT_TRUE(kv.check_integrity().ok());
}

TEST(KvCacheManager, ConcurrentComputeOfOnePrefixRegistersOneCopy) {
  KvCacheManager kv(small_config(4, 16));
  const std::vector<TokenId> prompt = iota_tokens(9, 0);
  (void)kv.open(1, prompt, "");
  (void)kv.open(2, prompt, "");
  ASSERT_TRUE(kv.grow(1, 9).ok());
  ASSERT_TRUE(kv.grow(2, 9).ok());
  kv.commit(1, prompt);
  kv.commit(2, prompt);
  EXPECT_EQ(kv.stats().n_blocks_cached, 2);
  EXPECT_TRUE(kv.is_block_cached(kv.block_table(1)[0]));
  EXPECT_FALSE(kv.is_block_cached(kv.block_table(2)[0]));
  ASSERT_TRUE(kv.check_integrity().ok());
  EXPECT_EQ(kv.open(3, prompt, ""), 8);
  EXPECT_EQ(kv.block_table(3)[0], kv.block_table(1)[0]);
}

TEST(KvCacheManager, MaxHitTokensCapsTheMatchAndProbeChangesNothing) {
  KvCacheManager kv(small_config(4, 16));
  const std::vector<TokenId> prompt = iota_tokens(21, 0);
  compute_and_close(kv, 1, prompt, "");
  const KvCacheStats before = kv.stats();
  const PrefixProbe probe = kv.probe(prompt, "");
  EXPECT_EQ(probe.n_hit_tokens, 20);
  EXPECT_EQ(probe.n_hit_blocks_free, 5);
  EXPECT_EQ(kv.probe(prompt, "", 11).n_hit_tokens, 8);
  EXPECT_EQ(kv.stats().prefix_queries_tokens, before.prefix_queries_tokens);
  EXPECT_EQ(kv.n_free_blocks(), before.n_blocks_free);
  EXPECT_EQ(kv.open(2, prompt, "", 0), 0);
  EXPECT_TRUE(kv.block_table(2).empty());
  EXPECT_EQ(kv.open(3, prompt, "", 11), 8);
  ASSERT_TRUE(kv.check_integrity().ok());
}

TEST(KvCacheManager, DisabledPrefixCachingNeverHits) {
  KvCacheManagerConfig cfg = small_config(4, 16);
  cfg.enable_prefix_caching = false;
  KvCacheManager kv(cfg);
  const std::vector<TokenId> prompt = iota_tokens(12, 0);
  compute_and_close(kv, 1, prompt, "");
  EXPECT_EQ(kv.stats().n_blocks_cached, 0);
  EXPECT_EQ(kv.open(2, prompt, ""), 0);
}

// P/D: a decode server reserves fresh pool blocks, a prefill server writes a prompt's blocks into
// them, the decode server adopts them as that prompt's cached blocks.
TEST(KvCacheManager, ReservedBlocksAreFreshPinnedAndAdoptedAsThePromptsCachedBlocks) {
  KvCacheManagerConfig cfg = small_config(4, 8);
  cfg.record_events = true;
  KvCacheManager kv(cfg);
  const std::vector<TokenId> old_prompt = iota_tokens(9, 500);
  compute_and_close(kv, 1, old_prompt, "");  // 2 cached free blocks
  (void)kv.take_events();

  // Six fresh blocks: the LRU free blocks first, cached ones evicted; none reusable until unpinned.
  EXPECT_FALSE(kv.reserve_fresh(9).has_value());
  std::optional<std::vector<BlockId>> reserved = kv.reserve_fresh(6);
  ASSERT_TRUE(reserved.has_value());
  EXPECT_EQ(reserved->size(), 6u);
  EXPECT_EQ(kv.n_free_blocks(), 2);
  EXPECT_EQ(kv.n_pins(), 6);
  for (BlockId b : *reserved) EXPECT_FALSE(kv.is_block_cached(b));
  EXPECT_TRUE(kv.check_integrity().ok());

  // Blocks 1..3 of a 17-token prompt (block 0 is cached already by another sequence's compute).
  const std::vector<TokenId> prompt = iota_tokens(17, 7);
  std::vector<TokenId> first_block(prompt.begin(), prompt.begin() + 5);
  compute_and_close(kv, 2, first_block, "");
  (void)kv.take_events();
  const std::vector<BlockId> adopted(reserved->begin(), reserved->begin() + 3);
  EXPECT_EQ(kv.adopt(adopted, prompt, "", 1), 3);
  const std::vector<KvCacheEvent> events = kv.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, KvCacheEvent::Kind::stored);
  const std::vector<uint64_t> hashes = kv.chain_hashes(prompt, "", 4);
  EXPECT_EQ(events[0].block_hashes, std::vector<uint64_t>(hashes.begin() + 1, hashes.end()));
  EXPECT_EQ(events[0].parent_hash, hashes[0]);
  EXPECT_EQ(events[0].token_ids, std::vector<TokenId>(prompt.begin() + 4, prompt.begin() + 16));

  // A request with that prompt hits all four blocks (one computed, three adopted), the adopted
  // ones in order; another salt hits nothing.
  EXPECT_EQ(kv.probe(prompt, "other").n_hit_tokens, 0);
  EXPECT_EQ(kv.open(3, prompt, ""), 16);
  EXPECT_EQ(std::vector<BlockId>(kv.block_table(3).begin() + 1, kv.block_table(3).end()), adopted);
  // Adopting the same prefix again leaves the second copy private.
  const std::vector<BlockId> again(reserved->begin() + 3, reserved->end());
  EXPECT_EQ(kv.adopt(again, prompt, "", 1), 0);
  EXPECT_TRUE(kv.check_integrity().ok());

  // Unpinned, the adopted blocks stay cached while the sequence holds them and after.
  for (BlockId b : *reserved) kv.unpin(b);
  EXPECT_EQ(kv.n_pins(), 0);
  kv.close(3);
  EXPECT_TRUE(kv.check_integrity().ok());
  EXPECT_EQ(kv.n_free_blocks(), 8);
  EXPECT_EQ(kv.probe(prompt, "").n_hit_tokens, 16);
}

TEST(KvCacheManager, CheckIntegrityDetectsCorruption) {
  KvCacheManager kv(small_config(4, 8));
  const std::vector<TokenId> prompt = iota_tokens(9, 0);
  compute_and_close(kv, 1, prompt, "");
  (void)kv.open(2, prompt, "");
  ASSERT_TRUE(kv.grow(2, 9).ok());
  kv.commit(2, prompt);
  ASSERT_TRUE(kv.check_integrity().ok());
  {
    KvCacheManager copy = kv;
    KvCacheManagerTestAccess::table(copy, 2).push_back(KvCacheManagerTestAccess::table(copy, 2)[0]);
    EXPECT_EQ(copy.check_integrity().code(), ErrorCode::internal);  // held twice, ref counted once
  }
  {
    KvCacheManager copy = kv;
    KvCacheManagerTestAccess::block_hashes(copy, 2)[1] ^= 1;  // cached block's hash disagrees
    EXPECT_EQ(copy.check_integrity().code(), ErrorCode::internal);
  }
  {
    KvCacheManager copy = kv;
    KvCacheManagerTestAccess::table(copy, 2).pop_back();  // a block referenced by nobody
    EXPECT_EQ(copy.check_integrity().code(), ErrorCode::internal);
  }
}

// ---- Brute-force reference: the same policy over plain data (full token prefixes instead of
// hashes, linear scans instead of maps). The manager must agree with it exactly: same hits, same
// block ids, same free-list order.
class ReferenceCache {
 public:
  ReferenceCache(int32_t block_size, int32_t n_blocks)
      : block_size_(block_size), blocks_(static_cast<size_t>(n_blocks)) {
    for (BlockId b = 0; b < n_blocks; ++b) free_order_.push_back(b);
  }

  int64_t open(SeqId seq_id, const std::vector<TokenId>& prompt, const std::string& salt) {
    Seq& seq = seqs_[seq_id];
    seq.salt = salt;
    const size_t max_blocks = (prompt.size() - 1) / static_cast<size_t>(block_size_);
    for (size_t i = 0; i < max_blocks; ++i) {
      const std::optional<BlockId> hit = find(salt, prefix(prompt, i));
      if (!hit) break;
      Block& block = blocks_[static_cast<size_t>(*hit)];
      if (block.refs == 0) free_order_.erase(std::find(free_order_.begin(), free_order_.end(), *hit));
      ++block.refs;
      seq.table.push_back(*hit);
    }
    seq.n_hashed = seq.table.size();
    return static_cast<int64_t>(seq.table.size()) * block_size_;
  }

  bool grow(SeqId seq_id, int64_t n_tokens) {
    Seq& seq = seqs_.at(seq_id);
    const size_t want = static_cast<size_t>((n_tokens + block_size_ - 1) / block_size_);
    if (want <= seq.table.size()) return true;
    if (want - seq.table.size() > free_order_.size()) return false;
    while (seq.table.size() < want) {
      const BlockId b = free_order_.front();
      free_order_.erase(free_order_.begin());
      blocks_[static_cast<size_t>(b)] = Block{1, std::nullopt, {}};
      seq.table.push_back(b);
    }
    return true;
  }

  void commit(SeqId seq_id, const std::vector<TokenId>& tokens) {
    Seq& seq = seqs_.at(seq_id);
    const size_t n_full = std::min(tokens.size() / static_cast<size_t>(block_size_), seq.table.size());
    for (; seq.n_hashed < n_full; ++seq.n_hashed) {
      std::vector<TokenId> content = prefix(tokens, seq.n_hashed);
      Block& block = blocks_[static_cast<size_t>(seq.table[seq.n_hashed])];
      if (!find(seq.salt, content) && !block.salt) {
        block.salt = seq.salt;
        block.content = std::move(content);
      }
    }
  }

  void close(SeqId seq_id) {
    const Seq& seq = seqs_.at(seq_id);
    for (auto b = seq.table.rbegin(); b != seq.table.rend(); ++b) {
      if (--blocks_[static_cast<size_t>(*b)].refs == 0) free_order_.push_back(*b);
    }
    seqs_.erase(seq_id);
  }

  const std::vector<BlockId>& table(SeqId seq_id) const { return seqs_.at(seq_id).table; }
  const std::vector<BlockId>& free_order() const { return free_order_; }
  int32_t n_cached() const {
    return static_cast<int32_t>(
        std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.salt.has_value(); }));
  }

 private:
  struct Block {
    int32_t refs = 0;
    std::optional<std::string> salt;  // set when cached
    std::vector<TokenId> content;     // the whole prefix up to the end of this block
  };
  struct Seq {
    std::string salt;
    std::vector<BlockId> table;
    size_t n_hashed = 0;
  };

  std::vector<TokenId> prefix(const std::vector<TokenId>& tokens, size_t block_idx) const {
    return std::vector<TokenId>(
        tokens.begin(),
        tokens.begin() + static_cast<std::ptrdiff_t>((block_idx + 1) * static_cast<size_t>(block_size_)));
  }
  std::optional<BlockId> find(const std::string& salt, const std::vector<TokenId>& content) const {
    for (size_t b = 0; b < blocks_.size(); ++b) {
      if (blocks_[b].salt && *blocks_[b].salt == salt && blocks_[b].content == content)
        return static_cast<BlockId>(b);
    }
    return std::nullopt;
  }

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_order_;
  std::map<SeqId, Seq> seqs_;
};

TEST(KvCacheManager, RandomWorkloadMatchesBruteForceReference) {
  constexpr int32_t kBlockSize = 4;
  constexpr int32_t kNBlocks = 40;
  constexpr int32_t kStreamTokens = 12 * kBlockSize;
  constexpr int kNOps = 15000;
  std::mt19937 rng(2024);
  KvCacheManager kv(small_config(kBlockSize, kNBlocks));
  ReferenceCache ref(kBlockSize, kNBlocks);

  // A few token streams that prompts share prefixes of; a prompt may diverge at one position.
  std::vector<std::vector<TokenId>> families(4);
  for (auto& family : families) {
    family.resize(kStreamTokens);
    for (TokenId& t : family) t = static_cast<TokenId>(rng() % 50);
  }
  const std::vector<std::string> salts = {"", "a", "b"};
  struct Live {
    std::vector<TokenId> stream;
    std::string salt;
    int64_t n_computed = 0;
  };
  std::map<SeqId, Live> live;
  SeqId next_seq = 1;
  int64_t n_hits = 0, n_grow_refused = 0;

  for (int op = 0; op < kNOps; ++op) {
    const int choice = static_cast<int>(rng() % 10);
    if (choice < 3 || live.empty()) {
      Live seq;
      seq.stream = families[rng() % families.size()];
      if (rng() % 2 == 0)
        seq.stream[rng() % kStreamTokens] = static_cast<TokenId>(100 + rng() % 1000);  // diverge
      seq.salt = salts[rng() % salts.size()];
      const size_t prompt_len = 1 + rng() % (kStreamTokens - 1);
      const std::vector<TokenId> prompt(seq.stream.begin(),
                                        seq.stream.begin() + static_cast<std::ptrdiff_t>(prompt_len));
      const int64_t hit = kv.open(next_seq, prompt, seq.salt);
      ASSERT_EQ(hit, ref.open(next_seq, prompt, seq.salt)) << "op " << op;
      n_hits += hit > 0 ? 1 : 0;
      seq.n_computed = hit;
      live.emplace(next_seq++, std::move(seq));
    } else if (choice < 7) {
      auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(rng() % live.size()));
      Live& seq = it->second;
      const int64_t target = std::min<int64_t>(kStreamTokens, seq.n_computed + 1 + rng() % 7);
      const bool grown = kv.grow(it->first, target).ok();
      ASSERT_EQ(grown, ref.grow(it->first, target)) << "op " << op;
      if (grown) {
        seq.n_computed = target;
        const std::vector<TokenId> computed(seq.stream.begin(), seq.stream.begin() + target);
        kv.commit(it->first, computed);
        ref.commit(it->first, computed);
      } else {
        ++n_grow_refused;
      }
    } else {
      auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(rng() % live.size()));
      kv.close(it->first);
      ref.close(it->first);
      live.erase(it);
    }
    const Status integrity = kv.check_integrity();
    ASSERT_TRUE(integrity.ok()) << "op " << op << ": " << integrity.to_string();
    ASSERT_EQ(kv.free_list(), ref.free_order()) << "op " << op;
    ASSERT_EQ(kv.stats().n_blocks_cached, ref.n_cached()) << "op " << op;
    for (const auto& [seq_id, seq] : live)
      ASSERT_EQ(kv.block_table(seq_id), ref.table(seq_id)) << "op " << op;
  }
  EXPECT_GT(n_hits, 100);
  EXPECT_GT(n_grow_refused, 10);
  EXPECT_GT(kv.stats().n_evictions, 100);
  for (const auto& [seq_id, seq] : live) kv.close(seq_id);
  EXPECT_EQ(kv.n_free_blocks(), kNBlocks);
  EXPECT_TRUE(kv.check_integrity().ok());
}

}  // namespace
}  // namespace ds
