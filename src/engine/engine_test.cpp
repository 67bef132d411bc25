// Engine against FakeModelRunner (engine/testing): outputs must equal the fake's cache-free reference
// whatever the batching, chunking, prefix sharing and preemption, in both scheduling modes, with
// Scheduler::check_integrity() after every step.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "engine/testing/fake_model_runner.h"
#include "sampling/logprobs.h"

namespace ds {
namespace {

using testing::FakeModelOptions;
using testing::FakeModelRunner;

std::vector<int32_t> make_prompt(int32_t n, int32_t salt, int32_t vocab) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(2 + (i * 7 + salt * 13 + (i * salt) % 5) % (vocab - 2));
  return p;
}

EngineConfig test_config(bool async) {
  EngineConfig c;
  c.scheduler.max_step_tokens = 64;
  c.scheduler.max_running = 16;
  c.scheduler.max_waiting = 256;
  c.block_size_tokens = 8;
  c.n_kv_blocks = 512;
  c.prefix_hash_seed = 42;
  c.async_scheduling = async;
  c.check_integrity = true;
  return c;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& cfg, FakeModelRunner& model) {
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, model, nullptr);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.detokenize = false;
  return r;
}

// Stats are published at the end of the engine's loop iteration, just after the events it emits.
EngineStats settled_stats(const Engine& engine, int64_t requests_finished) {
  for (int i = 0; i < 1000 && engine.stats().requests_finished < requests_finished; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return engine.stats();
}

TokenEvent run_one(Engine& engine, Request r) {
  RequestStream stream;
  Result<RequestId> id = engine.submit(std::move(r), stream.sink());
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  if (!id.ok()) return {};
  return stream.collect();
}

class EngineModes : public ::testing::TestWithParam<bool> {};

TEST_P(EngineModes, SingleGreedyRequestMatchesTheReference) {
  FakeModelRunner model(FakeModelOptions{});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  const std::vector<int32_t> prompt = make_prompt(37, 1, 512);
  const TokenEvent out = run_one(*engine, greedy_request(prompt, 12));
  EXPECT_EQ(out.finish_reason, FinishReason::length);
  EXPECT_TRUE(out.error.ok()) << out.error.to_string();
  EXPECT_EQ(out.tokens, model.reference_greedy(prompt, 12));
  EXPECT_EQ(out.usage.prompt_tokens, 37);
  EXPECT_EQ(out.usage.completion_tokens, 12);
  EXPECT_LE(out.queued_at, out.first_scheduled_at);
  EXPECT_LE(out.first_scheduled_at, out.first_token_at);
}

TEST_P(EngineModes, DecodeOnlyStepsAreCountedApartFromStepsWithPromptRows) {
  // 2 ms a step: the second request below arrives while the first is still in its first steps
  FakeModelRunner model(FakeModelOptions{.step_sleep_us = 2000});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  // Alone: one prefill step (37 tokens, one chunk) gives the first token, 11 decode steps the rest.
  const TokenEvent out = run_one(*engine, greedy_request(make_prompt(37, 1, 512), 12));
  ASSERT_TRUE(out.error.ok()) << out.error.to_string();
  EngineStats s = settled_stats(*engine, 1);
  EXPECT_EQ(s.decode_only_steps, 11);
  EXPECT_EQ(s.decode_only_tokens_total, 11);
  EXPECT_GT(s.decode_only_ns_total, 0);
  EXPECT_LE(s.decode_only_ns_total, s.forward_ns_total + s.step_gap_ns_total);
  // Beside a 200-token prompt (several 64-token chunks, one token): the steps that carry its chunks
  // are not decode-only, so fewer than the 19 decode rows of the first request are counted.
  RequestStream a, b;
  ASSERT_TRUE(engine->submit(greedy_request(make_prompt(10, 2, 512), 20), a.sink()).ok());
  ASSERT_TRUE(engine->submit(greedy_request(make_prompt(200, 3, 512), 1), b.sink()).ok());
  ASSERT_TRUE(a.collect().error.ok());
  ASSERT_TRUE(b.collect().error.ok());
  const EngineStats before = s;
  s = settled_stats(*engine, 3);
  const int64_t steps = s.decode_only_steps - before.decode_only_steps;
  const int64_t tokens = s.decode_only_tokens_total - before.decode_only_tokens_total;
  EXPECT_EQ(tokens, steps) << "one row in each: the long prompt's request had ended";
  EXPECT_GT(tokens, 0);
  EXPECT_LE(tokens, 19 - 2) << "at least two of the first request's decode rows shared a step with a chunk";
}

TEST_P(EngineModes, ManyConcurrentRequestsWithChunkedPrefillMatchTheReference) {
  FakeModelRunner model(FakeModelOptions{});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  constexpr int kRequests = 40;
  std::vector<RequestStream> streams(kRequests);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(make_prompt(5 + (i * 11) % 90, i, 512));  // up to 94 tokens: several chunks
    Result<RequestId> id = engine->submit(greedy_request(prompts.back(), 3 + i % 9), streams[i].sink());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
  }
  for (int i = 0; i < kRequests; ++i) {
    const TokenEvent out = streams[i].collect();
    EXPECT_TRUE(out.error.ok()) << out.error.to_string();
    EXPECT_EQ(out.tokens, model.reference_greedy(prompts[i], 3 + i % 9)) << "request " << i;
  }
  EXPECT_GT(model.counters().max_requests_per_call, 4) << "requests were batched";
  const EngineStats s = settled_stats(*engine, kRequests);
  EXPECT_EQ(s.requests_finished, kRequests);
  EXPECT_EQ(s.n_running, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total) << "every block released (cached ones are free too)";
}

TEST_P(EngineModes, SharedPrefixIsServedFromTheCacheAndGivesTheSameTokens) {
  FakeModelRunner model(FakeModelOptions{});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  std::vector<int32_t> prefix = make_prompt(40, 3, 512);
  std::vector<int32_t> a = prefix, b = prefix;
  a.insert(a.end(), {7, 8, 9});
  b.insert(b.end(), {10, 11});
  const TokenEvent first = run_one(*engine, greedy_request(a, 6));
  const TokenEvent second = run_one(*engine, greedy_request(b, 6));
  EXPECT_EQ(first.usage.cached_prompt_tokens, 0);
  EXPECT_EQ(second.usage.cached_prompt_tokens, 40) << "5 full blocks of 8";
  EXPECT_EQ(second.tokens, model.reference_greedy(b, 6));
  EXPECT_EQ(settled_stats(*engine, 2).prefix_hit_tokens, 40);

  Request salted = greedy_request(b, 6);
  salted.cache_salt = "tenant-2";
  const TokenEvent third = run_one(*engine, salted);
  EXPECT_EQ(third.usage.cached_prompt_tokens, 0) << "another salt never shares blocks";
  EXPECT_EQ(third.tokens, second.tokens);
}

TEST_P(EngineModes, PreemptionUnderBlockPressureKeepsOutputsExact) {
  // 2 ms per forward: all 16 submissions land while the first steps run, so the requests do meet in the
  // pool (with an instant fake model a loaded machine could finish the first ones before the last arrive,
  // and then nothing is preempted).
  FakeModelRunner model(FakeModelOptions{.step_sleep_us = 2000});
  EngineConfig cfg = test_config(GetParam());
  cfg.n_kv_blocks = 40;  // 320 tokens for 16 requests of ~60 tokens: they cannot all stay
  cfg.enable_prefix_caching = false;
  std::unique_ptr<Engine> engine = make_engine(cfg, model);
  constexpr int kRequests = 16;
  std::vector<RequestStream> streams(kRequests);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(make_prompt(20 + i, 100 + i, 512));
    ASSERT_TRUE(engine->submit(greedy_request(prompts.back(), 40), streams[i].sink()).ok());
  }
  for (int i = 0; i < kRequests; ++i) {
    const TokenEvent out = streams[i].collect();
    EXPECT_TRUE(out.error.ok()) << out.error.to_string();
    EXPECT_EQ(out.tokens, model.reference_greedy(prompts[i], 40)) << "request " << i;
  }
  EXPECT_GT(settled_stats(*engine, kRequests).n_preemptions, 0) << "the test must actually preempt";
}

TEST_P(EngineModes, SeededSamplingIsTheSameAloneAndInABusyBatch) {
  FakeModelRunner model(FakeModelOptions{});
  Request r = greedy_request(make_prompt(50, 9, 512), 24);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 1234;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;

  EngineConfig solo_cfg = test_config(GetParam());
  solo_cfg.scheduler.max_step_tokens = 512;
  std::unique_ptr<Engine> solo = make_engine(solo_cfg, model);
  const TokenEvent alone = run_one(*solo, r);
  solo.reset();

  EngineConfig busy_cfg = test_config(GetParam());
  busy_cfg.scheduler.max_step_tokens = 7;  // odd chunks, the prompt split unlike above
  std::unique_ptr<Engine> busy = make_engine(busy_cfg, model);
  std::vector<RequestStream> others(15);
  for (int i = 0; i < 15; ++i) {
    Request o = greedy_request(make_prompt(10 + i, 200 + i, 512), 30);
    o.sampling.temperature = 0.7f;
    o.sampling.seed = static_cast<uint64_t>(i);
    ASSERT_TRUE(busy->submit(o, others[i].sink()).ok());
  }
  const TokenEvent crowded = run_one(*busy, r);
  for (auto& s : others) s.collect();

  ASSERT_EQ(alone.tokens.size(), 24u);
  EXPECT_EQ(alone.tokens, crowded.tokens);
  ASSERT_EQ(alone.chosen_logprobs.size(), crowded.chosen_logprobs.size());
  for (size_t i = 0; i < alone.chosen_logprobs.size(); ++i) {
    EXPECT_EQ(alone.chosen_logprobs[i].token_id, crowded.chosen_logprobs[i].token_id);
    EXPECT_EQ(
        std::memcmp(&alone.chosen_logprobs[i].logprob, &crowded.chosen_logprobs[i].logprob, sizeof(float)), 0)
        << "bitwise at " << i;
  }
  EXPECT_EQ(alone.top_logprobs.size(), 24u);
  // The chosen logprob is the reference row's log-softmax at the chosen token.
  std::vector<int32_t> seq = r.prompt_tokens;
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<float> row = model.reference_logits(seq);
    const double expected = row[static_cast<size_t>(alone.tokens[i])] - log_sum_exp(row);
    EXPECT_NEAR(alone.chosen_logprobs[i].logprob, expected, 1e-5);
    seq.push_back(alone.tokens[i]);
  }
}

TEST_P(EngineModes, StopTokenIdsAndEosEndTheRequest) {
  FakeModelRunner model(FakeModelOptions{});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  const std::vector<int32_t> prompt = make_prompt(30, 5, 512);
  const std::vector<int32_t> ref = model.reference_greedy(prompt, 10);
  Request r = greedy_request(prompt, 10);
  // The first position whose token did not occur before it: the stop fires exactly there.
  size_t cut = 1;
  while (std::find(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(cut), ref[cut]) !=
         ref.begin() + static_cast<std::ptrdiff_t>(cut)) {
    ++cut;
  }
  r.stop.stop_token_ids = {ref[cut]};
  const TokenEvent out = run_one(*engine, r);
  EXPECT_EQ(out.finish_reason, FinishReason::stop);
  EXPECT_EQ(out.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(cut)));
  EXPECT_EQ(out.usage.completion_tokens, static_cast<int64_t>(cut) + 1);

  FakeModelOptions eos_first;
  eos_first.eos_logit_offset = 100.0f;  // EOS always wins
  FakeModelRunner eos_model(eos_first);
  std::unique_ptr<Engine> eos_engine = make_engine(test_config(GetParam()), eos_model);
  Request e = greedy_request(prompt, 10);
  e.stop.ignore_eos = false;
  const TokenEvent eos_out = run_one(*eos_engine, e);
  EXPECT_EQ(eos_out.finish_reason, FinishReason::stop);
  EXPECT_TRUE(eos_out.tokens.empty());
  e.stop.ignore_eos = true;
  e.stop.max_tokens = 3;
  const TokenEvent ignored = run_one(*eos_engine, e);
  EXPECT_EQ(ignored.finish_reason, FinishReason::length);
  EXPECT_EQ(ignored.tokens, std::vector<int32_t>(3, eos_first.eos_token_id));
}

TEST_P(EngineModes, CancelEndsTheRequestAndFreesItsBlocks) {
  FakeModelOptions slow;
  slow.step_sleep_us = 2000;
  FakeModelRunner model(slow);
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  RequestStream stream;
  Result<RequestId> id = engine->submit(greedy_request(make_prompt(20, 1, 512), 1000), stream.sink());
  ASSERT_TRUE(id.ok());
  std::optional<TokenEvent> first = stream.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(first->finished);
  engine->cancel(*id);
  TokenEvent rest = stream.collect();
  EXPECT_EQ(rest.finish_reason, FinishReason::cancelled);
  EXPECT_LT(rest.usage.completion_tokens, 1000);
  engine->cancel(*id);     // finished: ignored
  engine->cancel(999999);  // unknown: ignored
  const EngineStats s = settled_stats(*engine, 1);
  EXPECT_EQ(s.requests_finished, 1);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST_P(EngineModes, DeadlinePassedEndsTheRequest) {
  FakeModelOptions slow;
  slow.step_sleep_us = 2000;
  FakeModelRunner model(slow);
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  Request r = greedy_request(make_prompt(20, 1, 512), 1000);
  r.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  const TokenEvent out = run_one(*engine, r);
  EXPECT_EQ(out.finish_reason, FinishReason::deadline);
  EXPECT_EQ(out.error.code(), ErrorCode::engine_deadline_exceeded);
  EXPECT_LT(out.usage.completion_tokens, 1000);
}

TEST_P(EngineModes, InvalidRequestsAreRefusedAtSubmit) {
  FakeModelRunner model(FakeModelOptions{});
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  RequestStream s;
  const auto code_of = [&](Request r) { return engine->submit(std::move(r), s.sink()).status().code(); };
  EXPECT_EQ(code_of(greedy_request({}, 4)), ErrorCode::engine_bad_request);
  EXPECT_EQ(code_of(greedy_request({1, 512}, 4)), ErrorCode::engine_bad_request) << "id >= vocab";
  EXPECT_EQ(code_of(greedy_request({1, -1}, 4)), ErrorCode::engine_bad_request);
  EXPECT_EQ(code_of(greedy_request({1, 2}, 0)), ErrorCode::engine_bad_request) << "max_tokens 0";
  EXPECT_EQ(code_of(greedy_request({1, 2}, 5000)), ErrorCode::engine_bad_request) << "over max_seq_len";
  Request bad_temp = greedy_request({1, 2}, 4);
  bad_temp.sampling.temperature = -1.0f;
  EXPECT_EQ(code_of(bad_temp), ErrorCode::engine_bad_request);
  Request stop_strings = greedy_request({1, 2}, 4);
  stop_strings.stop.stop_strings = {"x"};
  EXPECT_EQ(code_of(stop_strings), ErrorCode::engine_bad_request) << "no tokenizer";
}

TEST_P(EngineModes, TheImagePlaceholderIsRefusedInPrompts) {  // V4.1 without vision
  FakeModelOptions with_image;
  with_image.image_token_id = 500;
  FakeModelRunner model(with_image);
  std::unique_ptr<Engine> engine = make_engine(test_config(GetParam()), model);
  RequestStream s;
  const Result<RequestId> r = engine->submit(greedy_request({1, 500, 2}, 4), s.sink());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::engine_bad_request);
  EXPECT_NE(r.status().message().find("prompt_tokens[1] = 500 is the image placeholder"), std::string::npos)
      << r.status().message();
}

TEST_P(EngineModes, FullQueueIsOverloadedAndShutdownEndsOpenRequests) {
  FakeModelOptions slow;
  slow.step_sleep_us = 5000;
  FakeModelRunner model(slow);
  EngineConfig cfg = test_config(GetParam());
  cfg.scheduler.max_running = 1;
  cfg.scheduler.max_waiting = 4;
  std::unique_ptr<Engine> engine = make_engine(cfg, model);
  std::vector<RequestStream> streams(12);
  int n_overloaded = 0;
  int n_accepted = 0;
  for (auto& s : streams) {
    Result<RequestId> id = engine->submit(greedy_request(make_prompt(8, 1, 512), 500), s.sink());
    if (id.ok()) {
      ++n_accepted;
    } else {
      EXPECT_EQ(id.status().code(), ErrorCode::engine_overloaded);
      EXPECT_EQ(id.status().kind(), ErrorKind::retryable);
      ++n_overloaded;
    }
  }
  EXPECT_GT(n_overloaded, 0);
  EXPECT_LE(n_accepted, 6) << "4 waiting + at most the running one and one in transit";
  engine->shutdown();
  for (int i = 0; i < n_accepted; ++i) {
    const TokenEvent out = streams[static_cast<size_t>(i)].collect();
    EXPECT_TRUE(out.finished);
    EXPECT_EQ(out.error.code(), ErrorCode::engine_shutting_down);
  }
  RequestStream late;
  EXPECT_EQ(engine->submit(greedy_request({1, 2}, 4), late.sink()).status().code(),
            ErrorCode::engine_shutting_down);
  engine->shutdown();  // idempotent
}

INSTANTIATE_TEST_SUITE_P(AsyncAndSync, EngineModes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "async" : "sync"; });

TEST(Engine, BadConfigurationsAreRefused) {
  FakeModelOptions o;
  o.block_size_multiple = 4;
  FakeModelRunner model(o);
  EngineConfig cfg = test_config(true);
  cfg.block_size_tokens = 6;
  EXPECT_EQ(Engine::create(cfg, model, nullptr).status().code(), ErrorCode::invalid_argument);
  cfg.block_size_tokens = 8;
  cfg.n_kv_blocks = 0;
  cfg.kv_cache_bytes = 10;  // less than one block
  EXPECT_EQ(Engine::create(cfg, model, nullptr).status().code(), ErrorCode::invalid_argument);
  cfg.kv_cache_bytes = 1 << 20;
  Result<std::unique_ptr<Engine>> sized = Engine::create(cfg, model, nullptr);
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ((*sized)->kv_cache_config().n_blocks, (1 << 20) / (8 * model.kv_cache_layout().bytes_per_token));
  EXPECT_EQ(model.kv_cache_config().n_blocks, (*sized)->kv_cache_config().n_blocks);
}

}  // namespace
}  // namespace ds
