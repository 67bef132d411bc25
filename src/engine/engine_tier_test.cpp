// The KV tiers end to end on the real model (generated tiny DeepSeek-V3 and V4 checkpoints) and a
// real disk folder: a second engine, with a fresh pool, restores the prefix the first one wrote
// and gives the same tokens and log-probabilities (bitwise) as a prefix served from the pool,
// reporting the restored tokens as cached; a corrupted entry is a miss and the output is the cold
// one; the pool's integrity is checked after every step (restores included).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "kvcache/disk_tier.h"
#include "kvcache/tier_key.h"
#include "model/model_registry.h"
#include "modelgen/testing/tiny_model.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

struct Fixture : modelgen::TinyModel {
  explicit Fixture(const std::string& arch)
      : TinyModel({.arch = arch,
                   .seed = 11,
                   .max_seq_len = 256,
                   .tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR,
                   .tag = "engine_tier"}) {}
};

struct TierDir {
  TierDir()
      : path(::testing::TempDir() + "/ds_engine_tier_disk_" + std::to_string(::getpid()) + "_" +
             std::to_string(std::random_device{}())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TierDir() { fs::remove_all(path); }
  std::string path;
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int64_t cached_prompt_tokens = 0;
  EngineStats stats;
  TierStats disk;
  CacheClearResult cleared;  // run()'s clear_after
};

struct RunOptions {
  int n_runs = 1;
  int32_t max_tokens = 8;
  int64_t write_every_tokens = 0;  // KvTierConfig::write_every_tokens
  int32_t max_step_tokens = 2048;  // SchedulerConfig::max_step_tokens (the prefill chunk)
  bool tier_write_chunks = false;  // Request::tier_write_chunks
  std::string salt = {};
  std::optional<CacheClearFilter> clear_after = {};  // DELETE /v1/cache after the runs
};

Request request(const std::string& salt = "", int32_t max_tokens = 8) {
  Request r;
  r.cache_salt = salt;
  r.cache_key = salt.empty() ? "" : "conv/" + salt;
  for (int32_t i = 0; i < 41; ++i) r.prompt_tokens.push_back((i * 7919 + 13) % 120000);
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.sampling.logprobs = true;
  r.detokenize = false;
  return r;
}

// One engine (fresh pool) that runs the request `n_runs` times; with a tier folder, over a
// DiskTier opened on it for the engine's namespace.
Outcome run(ModelRunner& model, const std::string* tier_dir, const RunOptions& options = {}) {
  EngineConfig cfg;
  cfg.block_size_tokens = 16;
  cfg.n_kv_blocks = 64;
  cfg.check_integrity = true;
  cfg.prefix_hash_seed = 99;
  cfg.scheduler.max_step_tokens = options.max_step_tokens;
  std::shared_ptr<DiskTier> disk;
  if (tier_dir != nullptr) {
    Result<std::vector<std::byte>> secret = load_or_create_tier_secret(*tier_dir + "/secret");
    EXPECT_TRUE(secret.ok()) << secret.status().to_string();
    cfg.kv_tiers.model_fingerprint = 1234;
    cfg.kv_tiers.secret = *secret;
    cfg.kv_tiers.write_every_tokens = options.write_every_tokens;
    cfg.kv_tiers.open = [&](uint64_t ns) -> Result<std::vector<std::shared_ptr<KvTier>>> {
      DS_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> opened, DiskTier::open({*tier_dir, 1 << 28, ns, {}, {}}));
      opened->wait_for_scan();
      disk = std::move(opened);
      return std::vector<std::shared_ptr<KvTier>>{disk};
    };
  }
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, model, nullptr);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  Outcome o;
  for (int i = 0; i < options.n_runs; ++i) {
    RequestStream stream;
    Request r = request(options.salt, options.max_tokens);
    r.tier_write_chunks = options.tier_write_chunks;
    EXPECT_TRUE((*engine)->submit(std::move(r), stream.sink()).ok());
    const TokenEvent out = stream.collect();
    EXPECT_TRUE(out.error.ok()) << out.error.to_string();
    o.tokens = out.tokens;
    o.logprobs.clear();
    for (const TokenLogprob& lp : out.chosen_logprobs) o.logprobs.push_back(lp.logprob);
    o.cached_prompt_tokens = out.usage.cached_prompt_tokens;
  }
  if (options.clear_after) {
    Result<CacheClearResult> cleared = (*engine)->clear_cache(*options.clear_after);
    EXPECT_TRUE(cleared.ok()) << cleared.status().to_string();
    if (cleared.ok()) o.cleared = *cleared;
  }
  (*engine)->shutdown();  // drains the tier writes
  o.stats = (*engine)->stats();
  if (disk) o.disk = disk->stats();
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const char* what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  EXPECT_EQ(std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)), 0) << what;
}

class EngineTiers : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineTiers, ASecondEngineRestoresWhatTheFirstWroteAndACorruptEntryIsAMiss) {
  Fixture f(GetParam());
  ASSERT_NE(f.model, nullptr);
  const Outcome cold = run(*f.model, nullptr);
  ASSERT_EQ(cold.tokens.size(), 8u);
  // The second run of one engine hits its own pool: the reference for a restored prefix (V4
  // resumes any hit by SWA replay, so it differs from cold by design; V3 does not).
  const Outcome pooled = run(*f.model, nullptr, {.n_runs = 2});
  EXPECT_EQ(pooled.cached_prompt_tokens, 32);

  TierDir tiers;
  const Outcome first = run(*f.model, &tiers.path);
  expect_same(first, cold, "the first engine computes from scratch");
  EXPECT_EQ(first.cached_prompt_tokens, 0);
  EXPECT_GE(first.disk.n_writes, 2) << "the prompt's 2 full blocks (and the output's) went down";
  EXPECT_EQ(first.stats.kv_tier_write_jobs_dropped, 0);

  const Outcome second = run(*f.model, &tiers.path);
  EXPECT_EQ(second.cached_prompt_tokens, 32);
  EXPECT_EQ(second.stats.kv_tier_restores, 1);
  EXPECT_EQ(second.stats.kv_tier_restored_tokens, 32);
  EXPECT_EQ(second.disk.n_hits, 2);
  expect_same(second, pooled, "a restored prefix computes what a pool hit computes");
  if (f.model->kv_cache_layout().swa_replay_tokens == 0) expect_same(second, cold, "V3: as cold");

  // Flip one byte of every entry: each is a miss (and deleted), the output is the cold one.
  for (const auto& e : fs::recursive_directory_iterator(tiers.path)) {
    if (e.path().extension() != ".kv") continue;
    std::fstream file(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(100);
    const char c = static_cast<char>(file.get());
    file.seekp(100);
    file.put(static_cast<char>(c ^ 0x40));
  }
  const Outcome corrupted = run(*f.model, &tiers.path);
  EXPECT_GE(corrupted.disk.n_corrupt, 1);
  EXPECT_EQ(corrupted.cached_prompt_tokens, 0);
  expect_same(corrupted, cold, "corrupt entries are never used");
}

// DELETE /v1/cache reaches the tiers: a tenant's entries are gone for every later engine (even one
// that never wrote them), another tenant's stay and still restore. The tiers see no model, so V3
// alone (the V4 fixture costs ~30 s).
TEST(EngineTierClear, ClearingTheCacheBySaltOrKeyRemovesTheTierEntriesToo) {
  Fixture f("deepseek_v3");
  ASSERT_NE(f.model, nullptr);
  TierDir tiers;
  const Outcome a = run(*f.model, &tiers.path, {.salt = "tenant-a"});
  const Outcome b = run(*f.model, &tiers.path, {.salt = "tenant-b"});
  ASSERT_GE(a.disk.n_writes, 2);
  ASSERT_GE(b.disk.n_writes, 2);
  const int64_t b_entries = b.disk.n_writes;
  // A fresh engine that wrote nothing clears tenant a by salt.
  const Outcome clearer =
      run(*f.model, &tiers.path, {.n_runs = 0, .clear_after = CacheClearFilter{"tenant-a", {}}});
  EXPECT_EQ(clearer.cleared.tier_entries_removed, a.disk.n_writes);
  EXPECT_EQ(run(*f.model, &tiers.path, {.salt = "tenant-a"}).cached_prompt_tokens, 0)
      << "a's entries are gone";
  const Outcome b_again = run(*f.model, &tiers.path, {.salt = "tenant-b"});
  EXPECT_EQ(b_again.cached_prompt_tokens, 32) << "b's entries are untouched";
  // By key prefix (b's requests carry cache_key "conv/tenant-b"), from the engine that just ran b.
  const Outcome by_key =
      run(*f.model, &tiers.path, {.salt = "tenant-b", .clear_after = CacheClearFilter{{}, "conv/tenant-b"}});
  EXPECT_EQ(by_key.cached_prompt_tokens, 32);
  EXPECT_GE(by_key.cleared.tier_entries_removed, b_entries);
  EXPECT_GE(by_key.cleared.blocks_removed, 2) << "and the pool's blocks";
  EXPECT_EQ(run(*f.model, &tiers.path, {.salt = "tenant-b"}).cached_prompt_tokens, 0);
}

// A long output goes down every write_every_tokens, not only at its end: 41 prompt + 119 computed
// output tokens are 10 full blocks of 16; the prompt's 2 go at the first token, then a job per 2
// new blocks (32 tokens): 5 jobs instead of 2 (prompt, end), the same 10 entries.
TEST(EngineTierWrites, ALongOutputIsWrittenEveryNTokens) {
  Fixture f("deepseek_v3");
  ASSERT_NE(f.model, nullptr);
  TierDir at_end, every;
  const Outcome a = run(*f.model, &at_end.path, {.max_tokens = 120, .write_every_tokens = 0});
  const Outcome b = run(*f.model, &every.path, {.max_tokens = 120, .write_every_tokens = 32});
  EXPECT_EQ(a.stats.kv_tier_write_jobs, 2);
  EXPECT_EQ(b.stats.kv_tier_write_jobs, 5);
  EXPECT_EQ(a.disk.n_writes, 10);
  EXPECT_EQ(b.disk.n_writes, 10);
  expect_same(a, b, "when blocks go down changes no output");
}

// A P/D prefill's blocks go down as its chunks complete them: 41 prompt tokens in chunks of 7 fill
// block 0 in the chunk ending at 21 and block 1 in the one ending at 35 — a job each, before the
// first token — then the end writes block 2: 3 jobs instead of 2 (prompt, end), the same 3 entries.
TEST(EngineTierWrites, PromptBlocksGoDownAsEachChunkCompletesThem) {
  Fixture f("deepseek_v3");
  ASSERT_NE(f.model, nullptr);
  TierDir whole, chunks;
  const Outcome a = run(*f.model, &whole.path, {.max_step_tokens = 7});
  const Outcome b = run(*f.model, &chunks.path, {.max_step_tokens = 7, .tier_write_chunks = true});
  EXPECT_EQ(a.stats.kv_tier_write_jobs, 2);
  EXPECT_EQ(b.stats.kv_tier_write_jobs, 3);
  EXPECT_EQ(a.disk.n_writes, 3);
  EXPECT_EQ(b.disk.n_writes, 3);
  expect_same(a, b, "when blocks go down changes no output");
}

INSTANTIATE_TEST_SUITE_P(Arch, EngineTiers, ::testing::Values("deepseek_v3", "deepseek_v4"));

}  // namespace
}  // namespace ds
