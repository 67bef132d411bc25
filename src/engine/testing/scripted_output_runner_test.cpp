// ScriptedOutputRunner over FakeModelRunner: the script rule, script files, and forced rows under
// chunked prefill, batching and a shared (prefix-cached) block; rows without a script match are
// the inner model's logits, bit for bit.
#include "engine/testing/scripted_output_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/engine.h"
#include "engine/request_stream.h"
#include "engine/testing/fake_model_runner.h"
#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds::testing {
namespace {

constexpr int32_t kEos = 1;

std::optional<int32_t> next(std::vector<int32_t> seq, const std::vector<OutputScript>& scripts) {
  return scripted_next_token(seq, scripts);
}

TEST(ScriptedNextToken, FollowsTheScriptAfterItsAnchor) {
  const std::vector<OutputScript> s = {{10, 11, 20, 21, 22, kEos}};
  EXPECT_EQ(next({5, 6, 10, 11}, s), 20);
  EXPECT_EQ(next({5, 10, 11, 20}, s), 21);
  EXPECT_EQ(next({10, 11, 20, 21, 22}, s), kEos);
  EXPECT_EQ(next({10, 11, 20, 21, 22, kEos}, s), std::nullopt);  // complete
  EXPECT_EQ(next({5, 6}, s), std::nullopt);                      // no anchor
  EXPECT_EQ(next({11}, s), std::nullopt);
  EXPECT_EQ(next({}, s), std::nullopt);
  // A wrong token in the middle breaks the match: the model is on its own again.
  EXPECT_EQ(next({10, 11, 20, 99}, s), std::nullopt);
}

TEST(ScriptedNextToken, RepetitionsAreCountedByTheLongestMatch) {
  const std::vector<OutputScript> s = {{10, 7, 7, 7, 8, kEos}};
  EXPECT_EQ(next({10}, s), 7);
  EXPECT_EQ(next({10, 7}, s), 7);
  EXPECT_EQ(next({10, 7, 7}, s), 7);
  EXPECT_EQ(next({10, 7, 7, 7}, s), 8);
  EXPECT_EQ(next({10, 7, 7, 7, 8}, s), kEos);
}

TEST(ScriptedNextToken, TheLongestAnchorPicksTheScriptAndTiesGoFirst) {
  const std::vector<OutputScript> s = {{10, 11, 30, kEos}, {9, 10, 11, 40, kEos}, {10, 11, 50, kEos}};
  EXPECT_EQ(next({0, 10, 11}, s), 30);  // generic anchor: the first of two equal matches
  EXPECT_EQ(next({9, 10, 11}, s), 40);  // the longer anchor wins
  EXPECT_EQ(next({9, 10, 11, 40}, s), kEos);
}

TEST(ParseOutputScripts, MarkersBecomeIdsAndEosIsAppendedOnce) {
  const Result<Tokenizer> tok =
      Tokenizer::from_json(tiny_tokenizer_json(), tiny_tokenizer_config_json(), "tiny");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::vector<int32_t> hello = *tok->encode("hello", false);
  const Result<std::vector<OutputScript>> s =
      parse_output_scripts(R"(["<think>hello", "<|user|>hello</s>"])", *tok, "f.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->size(), 2u);
  OutputScript a{301};
  a.insert(a.end(), hello.begin(), hello.end());
  a.push_back(kEos);
  EXPECT_EQ((*s)[0], a);
  OutputScript b{300};
  b.insert(b.end(), hello.begin(), hello.end());
  b.push_back(kEos);
  EXPECT_EQ((*s)[1], b);
  EXPECT_TRUE(parse_output_scripts(R"({"scripts": ["hello"]})", *tok, "f.json").ok());
  for (const char* bad : {"", "{}", "[]", "[1]", R"([""])", R"(["</s>"])", R"({"scripts": "x"})"}) {
    SCOPED_TRACE(bad);
    const Result<std::vector<OutputScript>> r = parse_output_scripts(bad, *tok, "f.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
    EXPECT_NE(r.status().message().find("f.json"), std::string::npos);
  }
  EXPECT_EQ(load_output_scripts("/no/such/file.json", *tok).status().code(), ErrorCode::io_error);
}

struct Harness {
  FakeModelRunner* fake = nullptr;  // owned by runner
  std::unique_ptr<ScriptedOutputRunner> runner;

  explicit Harness(std::vector<OutputScript> scripts, int32_t block_size = 4, int32_t n_blocks = 64) {
    auto inner = std::make_unique<FakeModelRunner>(FakeModelOptions{});
    fake = inner.get();
    runner = std::make_unique<ScriptedOutputRunner>(std::move(inner), std::move(scripts));
    KvCacheConfig cfg;
    cfg.block_size_tokens = block_size;
    cfg.n_blocks = n_blocks;
    EXPECT_TRUE(runner->init_kv_cache(cfg).ok());
  }
};

ForwardRequest chunk_of(SequenceState& seq, std::span<const int32_t> tokens, bool all_logits = false) {
  ForwardRequest r;
  r.seq = &seq;
  r.tokens = tokens;
  r.all_logits = all_logits;
  return r;
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Every row of a chunked prefill with all_logits: forced rows pick the script's token, the others
// are the fake model's reference logits exactly.
TEST(ScriptedOutputRunner, ChunkedPrefillRowsAreForcedOnlyAfterTheAnchor) {
  const std::vector<OutputScript> scripts = {{10, 11, 20, 21, 22, kEos}};
  Harness h(scripts);
  SequenceState seq;
  for (int32_t b = 0; b < 8; ++b) seq.block_table.push_back(b);
  const std::vector<int32_t> prompt = {3, 4, 5, 6, 7, 10, 11};
  std::vector<int32_t> so_far;
  LogitsOutput out;
  for (const size_t chunk : {size_t{2}, size_t{3}, size_t{2}}) {
    const std::span<const int32_t> tokens(prompt.data() + so_far.size(), chunk);
    const ForwardRequest req = chunk_of(seq, tokens, /*all_logits=*/true);
    ASSERT_TRUE(h.runner->forward({&req, 1}, out).ok());
    for (size_t i = 0; i < chunk; ++i) {
      so_far.push_back(tokens[i]);
      const float* row = out.logits.row(static_cast<int64_t>(i));
      const std::optional<int32_t> forced = scripted_next_token(so_far, scripts);
      if (forced) {
        EXPECT_EQ(argmax(row, 512), *forced) << so_far.size();
        EXPECT_GT(row[*forced], 900.0f);
      } else {
        const std::vector<float> ref = h.fake->reference_logits(so_far);
        EXPECT_TRUE(std::equal(ref.begin(), ref.end(), row)) << so_far.size();
      }
    }
  }
  // Greedy decoding from here emits the rest of the script, then EOS.
  std::vector<int32_t> emitted;
  int32_t token = argmax(out.logits.row(1), 512);
  while (emitted.size() < 10) {
    emitted.push_back(token);
    if (token == kEos) break;
    const ForwardRequest req = chunk_of(seq, {&token, 1});
    ASSERT_TRUE(h.runner->forward({&req, 1}, out).ok());
    token = argmax(out.logits.row(0), 512);
  }
  EXPECT_EQ(emitted, (std::vector<int32_t>{20, 21, 22, kEos}));
  EXPECT_EQ(h.runner->n_forced_rows(), 1 + 1 + 3);  // 10→11 row, 11→20 row, then 21, 22, EOS
}

// Two sequences in one call, each on its own script; the second one resumes after a prefix-cache
// hit on the first one's full block (it never forwarded the anchor itself).
TEST(ScriptedOutputRunner, BatchedSequencesAndASharedPrefixBlockFollowTheirScripts) {
  const std::vector<OutputScript> scripts = {{10, 11, 12, 13, 14, 60, kEos}, {70, 71, 72, kEos}};
  Harness h(scripts);
  SequenceState a;
  a.block_table = {0, 1};
  SequenceState b;
  b.block_table = {2, 3};
  const std::vector<int32_t> a_prompt = {10, 11, 12, 13, 14};
  const std::vector<int32_t> b_prompt = {5, 70, 71};
  LogitsOutput out;
  const ForwardRequest batch[] = {chunk_of(a, a_prompt), chunk_of(b, b_prompt)};
  ASSERT_TRUE(h.runner->forward(batch, out).ok());
  EXPECT_EQ(argmax(out.logits.row(0), 512), 60);
  EXPECT_EQ(argmax(out.logits.row(1), 512), 72);

  // c shares a's first block (positions 0..3 = 10 11 12 13) and starts at position 4.
  SequenceState c;
  c.block_table = {0, 4};
  c.n_tokens = 4;
  const std::vector<int32_t> c_chunk = {14};
  const ForwardRequest resume = chunk_of(c, c_chunk);
  ASSERT_TRUE(h.runner->forward({&resume, 1}, out).ok());
  EXPECT_EQ(argmax(out.logits.row(0), 512), 60);
  // Without the shared block's tokens the same chunk matches nothing.
  SequenceState d;
  d.block_table = {5, 6};
  d.n_tokens = 0;
  const ForwardRequest fresh = chunk_of(d, c_chunk);
  ASSERT_TRUE(h.runner->forward({&fresh, 1}, out).ok());
  const std::vector<float> ref = h.fake->reference_logits(c_chunk);
  EXPECT_TRUE(std::equal(ref.begin(), ref.end(), out.logits.row(0)));
}

TEST(ScriptedOutputRunner, InnerErrorsPassThroughAndChangeNothing) {
  Harness h({{10, 11, kEos}});
  SequenceState seq;
  seq.block_table = {0};
  const std::vector<int32_t> too_long = {1, 2, 3, 4, 5};  // 5 positions, one block of 4
  LogitsOutput out;
  const ForwardRequest req = chunk_of(seq, too_long);
  EXPECT_FALSE(h.runner->forward({&req, 1}, out).ok());
  EXPECT_EQ(seq.n_tokens, 0);
  EXPECT_EQ(h.runner->n_forced_rows(), 0);
}

// Through the real engine: concurrent requests, chunked prefill (16-token steps), a shared 40-token
// prefix, sampling at temperature 1, then the same requests again on prefix-cache hits. Every
// request's output is its own script's continuation, ended by the script's EOS.
TEST(ScriptedOutputRunner, EngineRequestsFollowTheirScriptsUnderBatchingAndPrefixHits) {
  constexpr int kRequests = 6;
  std::vector<int32_t> shared;
  for (int32_t t = 0; t < 40; ++t) shared.push_back(2 + (t * 37) % 190);
  // Each anchor spans the last 12 shared tokens (blocks 3 and 4, served from the prefix cache on
  // hits, never forwarded again) and two tokens of its own: without the tokens of the cached
  // blocks no script would match.
  std::vector<OutputScript> scripts;
  for (int32_t i = 0; i < kRequests; ++i) {
    OutputScript s(shared.end() - 12, shared.end());
    s.insert(s.end(), {200 + i, 300, 400 + i, 401 + i, 402, kEos});
    scripts.push_back(std::move(s));
  }
  auto inner = std::make_unique<FakeModelRunner>(FakeModelOptions{});
  ScriptedOutputRunner runner(std::move(inner), scripts);
  EngineConfig cfg;
  cfg.scheduler.max_step_tokens = 16;
  cfg.scheduler.max_running = 8;
  cfg.block_size_tokens = 8;
  cfg.n_kv_blocks = 256;
  cfg.prefix_hash_seed = 7;
  cfg.check_integrity = true;
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, runner, nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    std::vector<RequestStream> streams(kRequests);
    for (int32_t i = 0; i < kRequests; ++i) {
      Request r;
      r.prompt_tokens = shared;
      r.prompt_tokens.insert(r.prompt_tokens.end(), {200 + i, 300});
      r.sampling.temperature = 1.0f;
      r.sampling.seed = static_cast<uint64_t>(round * 100 + i);
      r.stop.max_tokens = 20;
      r.detokenize = false;
      ASSERT_TRUE((*engine)->submit(std::move(r), streams[static_cast<size_t>(i)].sink()).ok());
    }
    for (int32_t i = 0; i < kRequests; ++i) {
      const TokenEvent out = streams[static_cast<size_t>(i)].collect();
      EXPECT_EQ(out.tokens, (std::vector<int32_t>{400 + i, 401 + i, 402})) << i;
      EXPECT_EQ(out.finish_reason, FinishReason::stop) << i;
    }
  }
  // Stats are published at the end of an engine iteration, after its events. The second round
  // hits at least the 40 shared tokens (5 full blocks) per request.
  for (int i = 0; i < 1000 && (*engine)->stats().prefix_hit_tokens < 40 * kRequests; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GE((*engine)->stats().prefix_hit_tokens, 40 * kRequests);
  (*engine)->shutdown();
}

}  // namespace
}  // namespace ds::testing
