// Offline batch inference without a real model: the tiny tokenizer fixture, FakeModelRunner and a
// real Engine. Checks the input forms, per-line fields and errors, and the output order and shape.
#include "offline_batch.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/testing/fake_model_runner.h"
#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds::cli {
namespace {

using nlohmann::json;

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = [] {
    Result<Tokenizer> t =
        Tokenizer::from_json(testing::tiny_tokenizer_json(), testing::tiny_tokenizer_config_json(), "tiny");
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return std::move(t).value();
  }();
  return tok;
}

TEST(OfflineBatch, ParsesEveryInputFormAndReportsBadLines) {
  std::istringstream in(
      "{\"prompt\": \"hello\", \"id\": \"a\", \"max_tokens\": 3, \"temperature\": 0.5, \"seed\": 9}\n"
      "\n"
      "{\"prompt_token_ids\": [5, 6, 7], \"stop\": [\"x\", \"yz\"], \"stop_token_ids\": [4]}\n"
      "not json\n"
      "{\"prompt\": \"a\", \"prompt_token_ids\": [1]}\n"
      "{\"prompt\": \"a\", \"max_tokens\": 1e30}\n"
      "{\"prompt\": \"a\", \"ignore_eos\": true, \"logprobs\": true, \"top_logprobs\": 2}\n");
  BatchDefaults d;
  d.max_tokens = 17;
  Result<std::vector<BatchItem>> items = parse_batch_input(in, tiny_tokenizer(), d);
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 6u) << "the blank line is skipped";
  const BatchItem& a = (*items)[0];
  EXPECT_TRUE(a.error.ok()) << a.error.to_string();
  EXPECT_EQ(a.id_json, "\"a\"");
  Result<std::vector<int32_t>> hello = tiny_tokenizer().encode("hello");
  ASSERT_TRUE(hello.ok());
  std::vector<int32_t> expected = {0};  // BOS: add_bos_token in the fixture's config
  expected.insert(expected.end(), hello->begin(), hello->end());
  EXPECT_EQ(a.request.prompt_tokens, expected);
  EXPECT_EQ(a.request.stop.max_tokens, 3);
  EXPECT_EQ(a.request.sampling.temperature, 0.5f);
  EXPECT_EQ(a.request.sampling.seed, 9u);
  const BatchItem& b = (*items)[1];
  EXPECT_EQ(b.id_json, "1");
  EXPECT_EQ(b.request.prompt_tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(b.request.stop.max_tokens, 17) << "the default";
  EXPECT_EQ(b.request.stop.stop_strings, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(b.request.stop.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_NE((*items)[2].error.message().find("line 4"), std::string::npos) << (*items)[2].error.message();
  EXPECT_FALSE((*items)[3].error.ok()) << "two prompt forms";
  EXPECT_FALSE((*items)[4].error.ok()) << "max_tokens not an integer";
  EXPECT_TRUE((*items)[5].request.stop.ignore_eos);
  EXPECT_TRUE((*items)[5].request.sampling.logprobs);
  EXPECT_EQ((*items)[5].request.sampling.top_logprobs, 2);
}

TEST(OfflineBatch, ChatMessagesNeedTheChatTokens) {
  std::istringstream in("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  Result<std::vector<BatchItem>> items = parse_batch_input(in, tiny_tokenizer(), BatchDefaults{});
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 1u);
  EXPECT_EQ((*items)[0].error.code(), ErrorCode::tokenizer_bad_file)
      << "the tiny vocabulary has no <｜User｜>";
}

TEST(OfflineBatch, WritesOneLinePerInputInInputOrder) {
  testing::FakeModelOptions fo;
  fo.vocab_size = 269;      // ids 0..268 are contiguous in the tiny tokenizer: each decodes
  fo.row_sleep_ns = 20000;  // longer prompts take longer: completion order differs from input order
  testing::FakeModelRunner model(fo);
  EngineConfig cfg;
  cfg.block_size_tokens = 8;
  cfg.n_kv_blocks = 256;
  cfg.scheduler.max_waiting = 3;  // forces the overloaded-retry path
  cfg.scheduler.max_running = 4;
  cfg.check_integrity = true;
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, model, &tiny_tokenizer());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();

  std::string input;
  constexpr int kLines = 12;
  for (int i = 0; i < kLines; ++i) {
    json line = {{"prompt_token_ids", std::vector<int32_t>(static_cast<size_t>(40 - 3 * i), 3 + i)},
                 {"max_tokens", 2 + i % 3},
                 {"ignore_eos", true},
                 {"id", "req-" + std::to_string(i)}};
    input += line.dump() + "\n";
    if (i == 5) input += "{\"prompt_token_ids\": [1, 99999]}\n";  // id out of the model's range
  }
  std::istringstream in(input);
  Result<std::vector<BatchItem>> items = parse_batch_input(in, tiny_tokenizer(), BatchDefaults{});
  ASSERT_TRUE(items.ok());
  std::ostringstream out;
  const BatchSummary s = run_batch(**engine, *items, out, /*progress=*/false);
  EXPECT_EQ(s.n_requests, kLines + 1);
  EXPECT_EQ(s.n_failed, 1);

  std::istringstream lines(out.str());
  std::string text;
  int64_t index = 0;
  int64_t completion_tokens = 0;
  while (std::getline(lines, text)) {
    const json j = json::parse(text);
    EXPECT_EQ(j["index"].get<int64_t>(), index);
    if (index == 6) {
      EXPECT_EQ(j["error"]["code"], "engine_bad_request") << text;
    } else {
      const int i = static_cast<int>(index < 6 ? index : index - 1);
      EXPECT_EQ(j["id"], "req-" + std::to_string(i));
      EXPECT_EQ(j["finish_reason"], "length");
      const std::vector<int32_t> ids = j["token_ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> prompt(static_cast<size_t>(40 - 3 * i), 3 + i);
      EXPECT_EQ(ids, model.reference_greedy(prompt, 2 + i % 3)) << text;
      EXPECT_EQ(j["usage"]["prompt_tokens"].get<int64_t>(), 40 - 3 * i);
      completion_tokens += j["usage"]["completion_tokens"].get<int64_t>();
      EXPECT_TRUE(j["text"].is_string());
    }
    ++index;
  }
  EXPECT_EQ(index, kLines + 1);
  EXPECT_EQ(s.completion_tokens, completion_tokens);
}

}  // namespace
}  // namespace ds::cli
