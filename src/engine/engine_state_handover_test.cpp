// A sequence handed from one engine to another at a block boundary (prefill/decode disaggregation,
// docs/pd.md): the first engine prefills the prompt's leading blocks and exports the model's
// sequence state (Request::export_state), the second holds the same blocks and continues from the
// imported state (Request::state_import). On generated tiny DeepSeek-V3 and V4 checkpoints the
// continuation is bit-identical to a run that computed the whole prompt itself — for V4, unlike a
// plain prefix hit, which rebuilds the window by SWA bounded replay and changes the rows.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/seeded_prompt.h"
#include "modelgen/testing/tiny_model.h"

namespace ds {
namespace {

modelgen::TinyModel& fixture(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<modelgen::TinyModel>> fixtures;
  std::unique_ptr<modelgen::TinyModel>& f = fixtures[arch];
  if (!f) {
    // "ARCH/decode": a second instance of the same checkpoint (a decode server's model).
    const std::string base = arch.substr(0, arch.find('/'));
    f = std::make_unique<modelgen::TinyModel>(
        modelgen::TinyModelSpec{.arch = base,
                                .seed = 11,
                                .max_seq_len = 256,
                                .tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR,
                                .tag = base == arch ? "engine_state_handover" : "engine_state_handover_d"});
  }
  return *f;
}

std::vector<int32_t> prompt_of(int32_t n, uint32_t salt) { return ds::testing::seeded_prompt(n, salt); }

std::unique_ptr<Engine> make_engine(ModelRunner& model, bool async, int32_t max_step_tokens) {
  EngineConfig cfg;
  cfg.scheduler.max_step_tokens = max_step_tokens;
  cfg.block_size_tokens = 16;
  cfg.n_kv_blocks = 64;
  cfg.async_scheduling = async;
  cfg.check_integrity = true;
  Result<std::unique_ptr<Engine>> created = Engine::create(cfg, model, nullptr);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return created.ok() ? std::move(created).value() : nullptr;
}

Request target() {
  Request r;
  r.prompt_tokens = prompt_of(45, 3);
  r.stop.max_tokens = 8;
  r.stop.ignore_eos = true;
  r.sampling.logprobs = true;
  r.detokenize = false;
  return r;
}

TokenEvent run(Engine& engine, const Request& r) {
  RequestStream s;
  const Result<RequestId> id = engine.submit(r, s.sink());
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  TokenEvent out = s.collect();
  EXPECT_TRUE(out.error.ok()) << out.error.to_string();
  return out;
}

// The prompt's first `n` tokens prefilled with export_state: the blocks stay in `engine`'s prefix
// cache, the state comes back.
std::shared_ptr<const std::vector<std::byte>> prefill_and_export(Engine& engine, const Request& r,
                                                                 int64_t n) {
  Request head;
  head.prompt_tokens.assign(r.prompt_tokens.begin(), r.prompt_tokens.begin() + n);
  head.stop.max_tokens = 1;
  head.stop.ignore_eos = true;
  head.detokenize = false;
  head.export_state = true;
  return run(engine, head).sequence_state;
}

std::vector<float> logprobs_of(const TokenEvent& e) {
  std::vector<float> v;
  for (const TokenLogprob& lp : e.chosen_logprobs) v.push_back(lp.logprob);
  return v;
}

class StateHandover : public ::testing::TestWithParam<std::string> {};

TEST_P(StateHandover, ContinuesBitIdenticallyToAColdRun) {
  modelgen::TinyModel& f = fixture(GetParam());
  ASSERT_NE(f.model, nullptr);
  const bool keeps_state = f.model->kv_cache_layout().swa_replay_tokens > 0;
  std::unique_ptr<Engine> cold_engine = make_engine(*f.model, false, 2048);
  ASSERT_NE(cold_engine, nullptr);
  const TokenEvent cold = run(*cold_engine, target());
  ASSERT_EQ(cold.tokens.size(), 8u);
  cold_engine.reset();

  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async, chunks of 7" : "sync, one chunk");
    std::unique_ptr<Engine> engine = make_engine(*f.model, async, async ? 7 : 2048);
    ASSERT_NE(engine, nullptr);
    const std::shared_ptr<const std::vector<std::byte>> state = prefill_and_export(*engine, target(), 32);
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(state->empty(), !keeps_state);
    EXPECT_LE(static_cast<int64_t>(state->size()), f.model->sequence_state_bytes());
    if (!async) std::cout << GetParam() << ": sequence state of " << state->size() << " bytes\n";
    Request r = target();
    r.state_import = SequenceStateImport{32, state};
    const TokenEvent got = run(*engine, r);
    EXPECT_EQ(got.usage.cached_prompt_tokens, 32);
    EXPECT_EQ(got.tokens, cold.tokens);
    const std::vector<float> want = logprobs_of(cold), have = logprobs_of(got);
    ASSERT_EQ(have.size(), want.size());
    EXPECT_EQ(std::memcmp(have.data(), want.data(), want.size() * sizeof(float)), 0)
        << "chosen log-probabilities differ in their bits";
  }

  // The same 32 cached tokens without the state: V4 replays the window, and the rows change (so
  // the comparison above can fail); V3's blocks are its whole state.
  std::unique_ptr<Engine> engine = make_engine(*f.model, false, 2048);
  ASSERT_NE(prefill_and_export(*engine, target(), 32), nullptr);
  const TokenEvent replayed = run(*engine, target());
  EXPECT_EQ(replayed.usage.cached_prompt_tokens, 32);
  if (keeps_state) {
    EXPECT_NE(logprobs_of(replayed), logprobs_of(cold));
  } else {
    EXPECT_EQ(logprobs_of(replayed), logprobs_of(cold));
  }
}

TEST_P(StateHandover, AStateWithoutItsBlocksIsIgnoredAndMisuseIsRefused) {
  modelgen::TinyModel& f = fixture(GetParam());
  ASSERT_NE(f.model, nullptr);
  std::unique_ptr<Engine> exporter = make_engine(*f.model, false, 2048);
  const std::shared_ptr<const std::vector<std::byte>> state = prefill_and_export(*exporter, target(), 32);
  ASSERT_NE(state, nullptr);
  exporter.reset();
  // Another engine that does not hold the blocks: the import is not adopted, the prompt is
  // computed from scratch (as a cold run).
  std::unique_ptr<Engine> engine = make_engine(*f.model, false, 2048);
  const TokenEvent cold = run(*engine, target());
  std::unique_ptr<Engine> other = make_engine(*f.model, false, 2048);
  Request r = target();
  r.state_import = SequenceStateImport{32, state};
  const TokenEvent got = run(*other, r);
  EXPECT_EQ(got.usage.cached_prompt_tokens, 0);
  EXPECT_EQ(logprobs_of(got), logprobs_of(cold));

  RequestStream s;
  Request two = target();
  two.export_state = true;
  two.stop.max_tokens = 2;
  EXPECT_EQ(other->submit(two, s.sink()).status().code(), ErrorCode::engine_bad_request);
  if (!state->empty()) {
    // A state exported after 20 tokens: a valid state, but not at a block boundary.
    Request off = target();
    off.state_import = SequenceStateImport{20, prefill_and_export(*other, target(), 20)};
    RequestStream bad;
    ASSERT_TRUE(other->submit(off, bad.sink()).ok());
    const TokenEvent e = bad.collect();
    EXPECT_EQ(e.finish_reason, FinishReason::error);
    EXPECT_EQ(e.error.code(), ErrorCode::engine_bad_request);
    // Bytes this model cannot take (cut short, or at another position) are refused at submit, so
    // no step — and no other request in it — ever sees them.
    RequestStream refused;
    Request cut = target();
    cut.state_import = SequenceStateImport{
        32, std::make_shared<const std::vector<std::byte>>(state->begin(), state->end() - 1)};
    const Result<RequestId> id = other->submit(cut, refused.sink());
    EXPECT_EQ(id.status().code(), ErrorCode::engine_bad_request);
    EXPECT_NE(id.status().message().find("sequence state"), std::string::npos) << id.status().to_string();
    Request moved = target();
    moved.state_import = SequenceStateImport{16, state};  // exported at 32
    EXPECT_EQ(other->submit(moved, refused.sink()).status().code(), ErrorCode::engine_bad_request);
  } else {
    Request junk = target();
    junk.state_import = SequenceStateImport{32, std::make_shared<const std::vector<std::byte>>(4)};
    RequestStream refused;
    EXPECT_EQ(other->submit(junk, refused.sink()).status().code(), ErrorCode::engine_bad_request);
  }
}

// Copies block `from` of `src`'s pool into block `to` of `dst`'s through dst's page arrays: what a
// prefill server's puts do to the decode server's pool (docs/pd.md).
void put_block(ModelRunner& src, int32_t from, const std::vector<KvPageArray>& dst, int32_t to) {
  std::vector<std::byte> bytes(static_cast<size_t>(src.kv_block_bytes()));
  ASSERT_TRUE(src.export_kv_block(from, bytes).ok());
  size_t at = 0;
  for (const KvPageArray& a : dst) {
    std::memcpy(a.base + int64_t{to} * a.block_bytes, bytes.data() + at, static_cast<size_t>(a.block_bytes));
    at += static_cast<size_t>(a.block_bytes);
  }
  ASSERT_EQ(at, bytes.size());
}

bool wait_for_free_blocks(Engine& engine, int32_t n) {
  for (int i = 0; i < 500; ++i) {
    if (engine.stats().kv_blocks_free == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The decode side's pool written from outside: one engine (the prefill server) computes the
// prompt's first blocks and exports the state; the other reserves pool blocks, has the pages put
// straight into them, adopts them as the prompt's cached blocks and continues — bit-identical to
// a cold run, with no landing copy in between.
TEST_P(StateHandover, BlocksPutStraightIntoReservedPoolBlocksContinueBitIdentically) {
  modelgen::TinyModel& f = fixture(GetParam());
  modelgen::TinyModel& g = fixture(GetParam() + "/decode");
  ASSERT_NE(f.model, nullptr);
  ASSERT_NE(g.model, nullptr);
  std::unique_ptr<Engine> cold_engine = make_engine(*g.model, false, 2048);
  const TokenEvent cold = run(*cold_engine, target());
  cold_engine.reset();

  for (const bool write_pages : {true, false}) {
    SCOPED_TRACE(write_pages ? "pages put" : "pages zeroed");
    std::unique_ptr<Engine> prefill = make_engine(*f.model, false, 2048);
    // A fresh pool hands out blocks 0, 1, ... in order: the prompt's first two blocks are 0 and 1.
    const std::shared_ptr<const std::vector<std::byte>> state = prefill_and_export(*prefill, target(), 32);
    ASSERT_NE(state, nullptr);
    std::unique_ptr<Engine> decode = make_engine(*g.model, true, 7);
    const int32_t n_free = decode->stats().kv_blocks_free;
    Result<std::vector<BlockId>> blocks = decode->reserve_kv_blocks(2);
    ASSERT_TRUE(blocks.ok()) << blocks.status().to_string();
    ASSERT_EQ(blocks->size(), 2u);
    const std::vector<KvPageArray> pages = decode->kv_page_arrays();
    if (write_pages) {
      put_block(*f.model, 0, pages, (*blocks)[0]);
      put_block(*f.model, 1, pages, (*blocks)[1]);
    } else {
      // Whatever the pool held there (possibly this prompt's rows from an earlier engine): zeros.
      for (const KvPageArray& a : pages)
        for (BlockId b : *blocks)
          std::memset(a.base + int64_t{b} * a.block_bytes, 0, static_cast<size_t>(a.block_bytes));
    }
    const Request r0 = target();
    Result<int32_t> adopted = decode->adopt_kv_blocks(*blocks, r0.prompt_tokens, r0.cache_salt, 0);
    ASSERT_TRUE(adopted.ok()) << adopted.status().to_string();
    EXPECT_EQ(*adopted, 2);
    Request r = target();
    r.state_import = SequenceStateImport{32, state};
    const TokenEvent got = run(*decode, r);
    EXPECT_EQ(got.usage.cached_prompt_tokens, 32);
    if (write_pages) {
      EXPECT_EQ(got.tokens, cold.tokens);
      const std::vector<float> want = logprobs_of(cold), have = logprobs_of(got);
      ASSERT_EQ(have.size(), want.size());
      EXPECT_EQ(std::memcmp(have.data(), want.data(), want.size() * sizeof(float)), 0)
          << "chosen log-probabilities differ in their bits";
    } else {
      EXPECT_NE(logprobs_of(got), logprobs_of(cold));  // the blocks are what the answer stands on
    }
    // The lent blocks stay out of the free pool until released — here held 200 ms longer.
    EXPECT_TRUE(wait_for_free_blocks(*decode, n_free - 2));
    EXPECT_EQ(decode->stats().kv_blocks_lent, 2);
    const auto t0 = std::chrono::steady_clock::now();
    decode->release_kv_blocks(*blocks, t0 + std::chrono::milliseconds(200));
    EXPECT_TRUE(wait_for_free_blocks(*decode, n_free));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
    EXPECT_EQ(decode->stats().kv_blocks_lent, 0);
  }

  // Misuse: blocks never lent, too few tokens, more blocks than the pool has.
  std::unique_ptr<Engine> decode = make_engine(*g.model, false, 2048);
  const Request r = target();
  EXPECT_EQ(decode->adopt_kv_blocks({3}, r.prompt_tokens, "", 0).status().code(),
            ErrorCode::engine_bad_request);
  Result<std::vector<BlockId>> two = decode->reserve_kv_blocks(2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(decode->adopt_kv_blocks(*two, std::vector<int32_t>(20, 1), "", 1).status().code(),
            ErrorCode::engine_bad_request);
  EXPECT_EQ(decode->reserve_kv_blocks(1000).status().code(), ErrorCode::kvcache_out_of_blocks);
  // A cap on the blocks lent at once (a decode server keeps part of its pool for running sequences).
  EXPECT_EQ(decode->reserve_kv_blocks(2, 3).status().code(), ErrorCode::kvcache_out_of_blocks);
  Result<std::vector<BlockId>> one = decode->reserve_kv_blocks(1, 3);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  decode->release_kv_blocks(*one);
  decode->release_kv_blocks(*two);
  decode->release_kv_blocks(*two);  // a second release of the same ids changes nothing
  EXPECT_TRUE(wait_for_free_blocks(*decode, decode->stats().kv_blocks_total));
  decode->shutdown();
  EXPECT_EQ(decode->reserve_kv_blocks(1).status().code(), ErrorCode::engine_shutting_down);
}

// Adopted blocks are stored KV events like computed ones, tagged with the prompt's cache salt (a
// KV-event router keeps tenants apart; the decode server's pool index learns them).
TEST(OutsideKvBlocks, AdoptedBlocksAreStoredEventsWithTheirSalt) {
  modelgen::TinyModel& f = fixture("deepseek_v3");
  ASSERT_NE(f.model, nullptr);
  std::mutex mu;
  std::vector<KvCacheEvent> events;
  EngineConfig cfg;
  cfg.block_size_tokens = 16;
  cfg.n_kv_blocks = 64;
  cfg.kv_event_sink = [&](std::vector<KvCacheEvent>&& batch) {
    std::lock_guard<std::mutex> lock(mu);
    for (KvCacheEvent& e : batch) events.push_back(std::move(e));
  };
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, *f.model, nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Result<std::vector<BlockId>> blocks = (*engine)->reserve_kv_blocks(2);
  ASSERT_TRUE(blocks.ok());
  const std::vector<int32_t> tokens = prompt_of(45, 3);
  ASSERT_EQ(*(*engine)->adopt_kv_blocks(*blocks, tokens, "tenant-a", 0), 2);
  std::lock_guard<std::mutex> lock(mu);  // the adoption's events went out before it returned
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, KvCacheEvent::Kind::stored);
  EXPECT_EQ(events[0].block_hashes.size(), 2u);
  EXPECT_FALSE(events[0].parent_hash.has_value());
  EXPECT_EQ(events[0].salt_tag, tier_salt_tag("tenant-a"));
  EXPECT_EQ(events[0].token_ids, std::vector<int32_t>(tokens.begin(), tokens.begin() + 32));
}

INSTANTIATE_TEST_SUITE_P(Arch, StateHandover,
                         ::testing::Values("deepseek_v3", "deepseek_v4", "deepseek_v41"));

}  // namespace
}  // namespace ds
