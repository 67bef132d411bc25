// Structured output through the engine on a generated tiny DeepSeek-V3 (random weights, the real
// tokenizer): every output sampled under a grammar, greedy or at temperature 1, is in the grammar's
// language (checked by std::regex and nlohmann, engines independent of ours), ends by itself when the
// grammar completes, and unconstrained requests in the same steps produce exactly what they produce alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "model/model_registry.h"
#include "modelgen/testing/tiny_model.h"

namespace ds {
namespace {

struct Fixture : modelgen::TinyModel {
  std::unique_ptr<grammar::GrammarCompiler> compiler;

  Fixture()
      : TinyModel({.arch = "deepseek_v3",
                   .seed = 5,
                   .max_seq_len = 512,
                   .tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR,
                   .tag = "engine_grammar"}) {
    if (!tokenizer) return;
    Result<grammar::TokenTrie> trie = grammar::TokenTrie::from_tokenizer(*tokenizer);
    EXPECT_TRUE(trie.ok());
    if (!trie.ok()) return;
    compiler = std::make_unique<grammar::GrammarCompiler>(
        std::make_shared<const grammar::TokenTrie>(std::move(*trie)));
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

std::unique_ptr<Engine> make_engine(Fixture& f, bool async, bool jump_forward = false) {
  EngineConfig cfg;
  cfg.scheduler.max_running = 16;
  cfg.block_size_tokens = 16;
  cfg.n_kv_blocks = 400;
  cfg.async_scheduling = async;
  cfg.check_integrity = true;
  cfg.jump_forward = jump_forward;
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, *f.model, f.tokenizer.get());
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

Request request_for(Fixture& f, std::string_view prompt, float temperature, uint64_t seed) {
  Request r;
  r.prompt_tokens = *f.tokenizer->encode(prompt, false);
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.stop.max_tokens = 200;
  return r;
}

std::shared_ptr<const grammar::CompiledGrammar> compile(Fixture& f, grammar::GrammarSpec::Kind kind,
                                                        std::string source) {
  grammar::GrammarSpec spec;
  spec.kind = kind;
  spec.source = std::move(source);
  Result<std::shared_ptr<const grammar::CompiledGrammar>> g = f.compiler->compile(spec);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

TEST(EngineGrammar, RegexOutputsMatchUnderGreedyAndSampling) {
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  const std::string pattern = R"(\{"id":\d{1,4},"name":"[a-z]{1,8}","ok":(true|false)\})";
  auto g = compile(f, grammar::GrammarSpec::Kind::regex, pattern);
  const std::regex re(pattern);
  for (bool async : {false, true}) {
    std::unique_ptr<Engine> engine = make_engine(f, async);
    std::vector<RequestStream> streams(12);
    for (size_t i = 0; i < streams.size(); ++i) {
      Request r = request_for(f, "Give me a record", i == 0 ? 0.0f : 1.0f, 100 + i);
      r.grammar = g;
      ASSERT_TRUE(engine->submit(r, streams[i].sink()).ok());
    }
    for (RequestStream& s : streams) {
      const TokenEvent out = s.collect();
      ASSERT_TRUE(out.error.ok()) << out.error.to_string();
      EXPECT_EQ(out.finish_reason, FinishReason::stop) << out.text;
      EXPECT_TRUE(std::regex_match(out.text, re)) << "'" << out.text << "'";
    }
  }
}

TEST(EngineGrammar, JsonSchemaOutputsParseAndMixedBatchLeavesOthersUnchanged) {
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  auto g = compile(f, grammar::GrammarSpec::Kind::json_schema,
                   R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},
                       "n":{"type":"integer","minimum":-5,"maximum":500},
                       "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},
                       "required":["city","n"],"additionalProperties":false})");
  // The unconstrained request alone...
  Request plain = request_for(f, "Write anything", 1.0f, 77);
  plain.stop.max_tokens = 24;
  plain.stop.ignore_eos = true;
  plain.sampling.logprobs = true;
  TokenEvent alone;
  {
    std::unique_ptr<Engine> engine = make_engine(f, true);
    RequestStream s;
    ASSERT_TRUE(engine->submit(plain, s.sink()).ok());
    alone = s.collect();
  }
  // ...and among constrained ones.
  std::unique_ptr<Engine> engine = make_engine(f, true);
  std::vector<RequestStream> streams(10);
  RequestStream mixed;
  for (size_t i = 0; i < streams.size(); ++i) {
    Request r = request_for(f, "Describe a city as JSON", i % 3 == 0 ? 0.0f : 1.0f, 9 + i);
    r.grammar = g;
    r.sampling.logprobs = true;
    ASSERT_TRUE(engine->submit(r, streams[i].sink()).ok());
    if (i == 4) {
      ASSERT_TRUE(engine->submit(plain, mixed.sink()).ok());
    }
  }
  for (RequestStream& s : streams) {
    const TokenEvent out = s.collect();
    ASSERT_TRUE(out.error.ok()) << out.error.to_string();
    EXPECT_EQ(out.finish_reason, FinishReason::stop);
    nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << out.text;
    ASSERT_TRUE(doc.is_object() && doc.contains("city") && doc["city"].is_string()) << out.text;
    ASSERT_TRUE(doc["n"].is_number_integer() && doc["n"] >= -5 && doc["n"] <= 500) << out.text;
    for (const auto& [k, v] : doc.items()) EXPECT_TRUE(k == "city" || k == "n" || k == "tags") << out.text;
    // Logprobs are those of the masked distribution: finite for every chosen token.
    for (const TokenLogprob& lp : out.chosen_logprobs) EXPECT_TRUE(std::isfinite(lp.logprob)) << out.text;
  }
  const TokenEvent together = mixed.collect();
  EXPECT_EQ(together.tokens, alone.tokens);
  ASSERT_EQ(together.chosen_logprobs.size(), alone.chosen_logprobs.size());
  for (size_t i = 0; i < alone.chosen_logprobs.size(); ++i)
    EXPECT_EQ(together.chosen_logprobs[i].logprob, alone.chosen_logprobs[i].logprob);
}

// Jump-forward (EngineConfig::jump_forward): the forced keys of a schema are appended without sampling.
// Outputs stay valid, the forced tokens are counted, and the engine's scheduler stays consistent
// (check_integrity after every step), with logprobs and penalties on.
TEST(EngineGrammar, JumpForwardAppendsForcedTokensAndOutputsStayValid) {
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  auto g = compile(f, grammar::GrammarSpec::Kind::json_schema,
                   R"({"type":"object","properties":{"identifier":{"type":"integer","minimum":0,"maximum":99},
                       "description":{"type":"string","maxLength":10},"category":{"enum":["alpha","beta"]}},
                       "required":["identifier","description","category"],"additionalProperties":false})");
  std::unique_ptr<Engine> engine = make_engine(f, /*async=*/true, /*jump_forward=*/true);
  ASSERT_NE(engine, nullptr);
  std::vector<RequestStream> streams(8);
  for (size_t i = 0; i < streams.size(); ++i) {
    Request r = request_for(f, "Describe a thing as JSON", i % 2 == 0 ? 0.0f : 1.0f, 40 + i);
    r.grammar = g;
    r.sampling.logprobs = i % 3 == 0;
    if (i == 5) r.sampling.repetition_penalty = 1.2f;
    ASSERT_TRUE(engine->submit(r, streams[i].sink()).ok());
  }
  for (RequestStream& s : streams) {
    const TokenEvent out = s.collect();
    ASSERT_TRUE(out.error.ok()) << out.error.to_string();
    EXPECT_EQ(out.finish_reason, FinishReason::stop) << out.text;
    nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << out.text;
    EXPECT_TRUE(doc.contains("identifier") && doc.contains("description") && doc.contains("category"))
        << out.text;
    EXPECT_EQ(*f.tokenizer->decode(out.tokens), out.text);
  }
  const EngineStats stats = engine->stats();
  EXPECT_GT(stats.jump_forward_tokens_total, 8) << "no key was jumped over";
  EXPECT_LT(stats.jump_forward_tokens_total, stats.generation_tokens_total);
}

TEST(EngineGrammar, GrammarStartsAfterTheGivenToken) {
  Fixture& f = fixture();
  ASSERT_NE(f.model, nullptr);
  // The greedy unconstrained output's second token plays `</think>`: the grammar must leave the first
  // two tokens alone and constrain everything after.
  Request probe = request_for(f, "Think first", 0.0f, 1);
  probe.stop.max_tokens = 4;
  probe.stop.ignore_eos = true;
  std::unique_ptr<Engine> engine = make_engine(f, false);
  RequestStream ps;
  ASSERT_TRUE(engine->submit(probe, ps.sink()).ok());
  const TokenEvent free_run = ps.collect();
  ASSERT_GE(free_run.tokens.size(), 2u);
  const int32_t marker = free_run.tokens[1];
  if (free_run.tokens[0] == marker) GTEST_SKIP() << "the marker token is also the first token";
  Request r = request_for(f, "Think first", 0.0f, 1);
  r.grammar = compile(f, grammar::GrammarSpec::Kind::regex, "(yes|no)");
  r.grammar_after_token = marker;
  RequestStream rs;
  ASSERT_TRUE(engine->submit(r, rs.sink()).ok());
  const TokenEvent out = rs.collect();
  ASSERT_TRUE(out.error.ok()) << out.error.to_string();
  ASSERT_GE(out.tokens.size(), 3u);
  EXPECT_EQ(out.tokens[0], free_run.tokens[0]);
  EXPECT_EQ(out.tokens[1], marker);
  const std::string tail = *f.tokenizer->decode(std::span(out.tokens).subspan(2));
  EXPECT_TRUE(tail == "yes" || tail == "no") << tail;
  EXPECT_EQ(out.finish_reason, FinishReason::stop);
}

}  // namespace
}  // namespace ds
