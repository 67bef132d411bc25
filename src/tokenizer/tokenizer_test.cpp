#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds {
namespace {

using Ids = std::vector<int32_t>;
int32_t byte_id(unsigned char b) { return testing::tiny_byte_id(b); }

Tokenizer tiny(bool merges_as_pairs = false) {
  Result<Tokenizer> tok = Tokenizer::from_json(testing::tiny_tokenizer_json(merges_as_pairs),
                                               testing::tiny_tokenizer_config_json(), "tiny");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

TEST(Tokenizer, EncodesWithMergesAndAddedTokens) {
  const Tokenizer tok = tiny();
  EXPECT_EQ(*tok.encode("hello the"), Ids({264, 261}));
  // "<s>" is special, "<|user|>" a normalized non-special added token: both are recognised.
  EXPECT_EQ(*tok.encode("<s>hello<|user|>12"), Ids({0, 264, 300, 267}));
  // parse_special=false: the same text is all BPE; "<s>" becomes its three bytes.
  EXPECT_EQ(*tok.encode("<s>", /*parse_special=*/false), Ids({byte_id('<'), byte_id('s'), byte_id('>')}));
  EXPECT_EQ(*tok.encode(""), Ids({}));
  // Digits split into groups of at most three before BPE: "1212" -> "121" "2".
  EXPECT_EQ(*tok.encode("1212"), Ids({267, byte_id('1'), byte_id('2')}));
}

TEST(Tokenizer, BothMergeFormsGiveTheSameTokenizer) {
  const Tokenizer a = tiny(false);
  const Tokenizer b = tiny(true);
  for (const char* text : {"hello the aaaa", "<think> 12 12", "  x  "})
    EXPECT_EQ(*a.encode(text), *b.encode(text)) << text;
}

TEST(Tokenizer, ConfigTokensAndSizes) {
  const Tokenizer tok = tiny();
  EXPECT_EQ(tok.bos_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_TRUE(tok.add_bos_by_default());
  EXPECT_EQ(tok.vocab_size(), 302);
  EXPECT_EQ(tok.token_to_id("<think>"), 301);
  EXPECT_EQ(tok.token_to_id("Ġthe"), 261);
  EXPECT_FALSE(tok.token_to_id("nope").has_value());
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_special(300));

  Result<Tokenizer> no_config = Tokenizer::from_json(testing::tiny_tokenizer_json(), "", "tiny");
  ASSERT_TRUE(no_config.ok());
  EXPECT_EQ(no_config->bos_id(), -1);
  EXPECT_FALSE(no_config->add_bos_by_default());
}

TEST(Tokenizer, NeverAddsBos) {
  const Tokenizer tok = tiny();
  ASSERT_TRUE(tok.add_bos_by_default());
  EXPECT_EQ(tok.encode("hello")->front(), 264);
}

TEST(Tokenizer, InvalidUtf8NamesTheOffset) {
  const Tokenizer tok = tiny();
  for (bool parse_special : {true, false}) {
    Result<Ids> r = tok.encode("hello\xC3(", parse_special);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::tokenizer_bad_input);
    EXPECT_NE(r.status().message().find("offset 5"), std::string::npos) << r.status().message();
  }
}

TEST(Tokenizer, DecodeRoundTripsAndSkipsSpecials) {
  const Tokenizer tok = tiny();
  const std::string text = "<s>hello the <|user|> 12 é 中 😀\n<think>";
  Result<Ids> ids = tok.encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*tok.decode(*ids), text);
  EXPECT_EQ(*tok.decode(*ids, /*skip_special=*/true), text.substr(3));  // only <s> is special
  // Raw bytes of half a character come back as they are; the caller decides how to repair.
  EXPECT_EQ(*tok.decode(Ids({byte_id(0xE4), byte_id(0xB8)})), "\xE4\xB8");
}

TEST(Tokenizer, DecodeUnknownIdIsAnError) {
  const Tokenizer tok = tiny();
  for (int32_t bad : {-1, 302, 1 << 30, 299}) {  // 299: a hole between merges and added tokens
    Result<std::string> r = tok.decode(Ids({264, bad}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::tokenizer_unknown_id);
    EXPECT_NE(r.status().message().find(std::to_string(bad)), std::string::npos);
  }
}

// Bad files: each error names the file and the field.
struct BadFileCase {
  const char* name;
  std::function<void(nlohmann::json&)> mutate;
  const char* expect_in_message;
};

TEST(Tokenizer, MalformedFilesNameFileAndField) {
  const std::vector<BadFileCase> cases = {
      {"merge not two tokens", [](nlohmann::json& j) { j["model"]["merges"][0] = "h e x"; },
       "model.merges[0]"},
      {"merge wrong type", [](nlohmann::json& j) { j["model"]["merges"][1] = 5; }, "model.merges[1]"},
      {"vocab id not int", [](nlohmann::json& j) { j["model"]["vocab"]["h"] = "x"; }, "model.vocab[\"h\"]"},
      {"no model", [](nlohmann::json& j) { j.erase("model"); }, "model: missing"},
      {"normalizer",
       [](nlohmann::json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       },
       "normalizer"},
      {"split behavior",
       [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       "pre_tokenizer.pretokenizers[0].behavior"},
      {"bad regex",
       [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][1]["pattern"]["Regex"] = "(x"; }, "regex"},
      {"added token id", [](nlohmann::json& j) { j["added_tokens"][2]["id"] = -4; }, "added_tokens[2].id"},
      {"added token content", [](nlohmann::json& j) { j["added_tokens"][1].erase("content"); },
       "added_tokens[1].content"},
      {"decoder",
       [](nlohmann::json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder"},
      {"dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout"},
  };
  for (const BadFileCase& c : cases) {
    nlohmann::json j = nlohmann::json::parse(testing::tiny_tokenizer_json());
    c.mutate(j);
    Result<Tokenizer> tok = Tokenizer::from_json(j.dump(), "", "dir");
    ASSERT_FALSE(tok.ok()) << c.name;
    EXPECT_EQ(tok.status().code(), ErrorCode::tokenizer_bad_file) << c.name;
    EXPECT_NE(tok.status().message().find("dir:tokenizer.json"), std::string::npos)
        << c.name << ": " << tok.status().message();
    EXPECT_NE(tok.status().message().find(c.expect_in_message), std::string::npos)
        << c.name << ": " << tok.status().message();
  }
  Result<Tokenizer> not_json = Tokenizer::from_json("{\"model\": ", "", "dir");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("not valid JSON"), std::string::npos);
  Result<Tokenizer> bad_config =
      Tokenizer::from_json(testing::tiny_tokenizer_json(), R"({"bos_token": "<nope>"})", "dir");
  ASSERT_FALSE(bad_config.ok());
  EXPECT_NE(bad_config.status().message().find("dir:tokenizer_config.json: bos_token"), std::string::npos)
      << bad_config.status().message();
  Result<Tokenizer> bad_flag =
      Tokenizer::from_json(testing::tiny_tokenizer_json(), R"({"add_bos_token": "yes"})", "dir");
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_NE(bad_flag.status().message().find("add_bos_token"), std::string::npos);
}

TEST(Tokenizer, ConcurrentEncodesAgreeWithSerialOnes) {
  const Tokenizer tok = tiny();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back(fmt::format("hello the {} aaaa{} <s>x hell{}o", i, i % 7, i % 3));
  std::vector<Ids> expected;
  for (const std::string& t : texts) expected.push_back(*tok.encode(t));
  std::vector<std::thread> threads;
  std::vector<int> n_bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (*tok.encode(texts[(i + static_cast<size_t>(t) * 31) % texts.size()]) !=
              expected[(i + static_cast<size_t>(t) * 31) % texts.size()]) {
            ++n_bad[static_cast<size_t>(t)];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(n_bad, std::vector<int>(4, 0));
}

TEST(Tokenizer, LoadReadsADirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ds_tok_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << testing::tiny_tokenizer_json();
  Result<Tokenizer> without_config = Tokenizer::load(dir.string());
  ASSERT_TRUE(without_config.ok()) << without_config.status().to_string();
  EXPECT_EQ(without_config->bos_id(), -1);
  std::ofstream(dir / "tokenizer_config.json") << testing::tiny_tokenizer_config_json();
  Result<Tokenizer> with_config = Tokenizer::load(dir.string());
  ASSERT_TRUE(with_config.ok());
  EXPECT_EQ(with_config->bos_id(), 0);
  std::ofstream(dir / "tokenizer_config.json") << "{oops";
  Result<Tokenizer> broken = Tokenizer::load(dir.string());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("tokenizer_config.json"), std::string::npos);
  std::filesystem::remove_all(dir);
  Result<Tokenizer> missing = Tokenizer::load(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace ds
