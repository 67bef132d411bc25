#include "server/routes_operational.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "http/http_server.h"
#include "http/test_http_client.h"
#include "http/test_prometheus_parser.h"
#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds::server {
namespace {

using nlohmann::json;
using testing::ParsedResponse;
using testing::RawConnection;

class OperationalRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::from_json(ds::testing::tiny_tokenizer_json(),
                                    ds::testing::tiny_tokenizer_config_json(), "tiny");
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(tok).value());
    OperationalRoutesConfig oc;
    oc.model_id = "deepseek-tiny";
    oc.max_model_len = 4096;
    oc.created_unix_s = 1700000000;
    oc.tokenizer = tokenizer_.get();
    oc.metrics = &registry_;
    oc.ready = [this] { return ready_.load(); };
    RouteTable router;
    ASSERT_TRUE(add_operational_routes(router, oc).ok());
    EXPECT_FALSE(add_operational_routes(router, oc).ok()) << "second registration must clash";
    ServerConfig sc;
    sc.host = "127.0.0.1";
    sc.api_keys = *ApiKeySet::from_keys({"sk-test"});
    auto server = HttpServer::start(std::move(sc), std::move(router), Logger(LogLevel::off), &metrics_);
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
  }

  ParsedResponse call(const std::string& method, const std::string& path, const std::string& body = "",
                      bool with_key = true) {
    RawConnection c = RawConnection::connect_local(server_->port());
    std::string req = fmt::format("{} {} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n{}\r\n{}", method, path,
                                  body.size(), with_key ? "Authorization: Bearer sk-test\r\n" : "", body);
    EXPECT_TRUE(c.send_all(req));
    auto r = c.read_response();
    EXPECT_TRUE(r);
    return r.value_or(ParsedResponse{});
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  MetricsRegistry registry_;
  ServingMetrics metrics_{registry_};
  std::atomic<bool> ready_{false};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(OperationalRoutesTest, HealthReadyAndMetricsNeedNoKey) {
  EXPECT_EQ(call("GET", "/health", "", false).status, 200);
  ParsedResponse r = call("GET", "/ready", "", false);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("retry-after"), "1");
  ready_ = true;
  EXPECT_EQ(call("GET", "/ready", "", false).status, 200);
  r = call("GET", "/metrics", "", false);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.header("content-type").starts_with("text/plain; version=0.0.4"));
  const auto p = testing::parse_prometheus_text(r.body);
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(
      p.value("deepinfer:http_requests_total", {{"route", "/ready"}, {"method", "GET"}, {"status", "503"}}),
      1);
}

TEST_F(OperationalRoutesTest, ModelsListsTheServedModel) {
  EXPECT_EQ(call("GET", "/v1/models", "", false).status, 401);
  ParsedResponse r = call("GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "deepseek-tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 4096);
  EXPECT_EQ(j["data"][0]["created"], 1700000000);
}

TEST_F(OperationalRoutesTest, TokenizeMatchesTheTokenizerAndRoundTrips) {
  const std::string text = "hello the 12";
  ParsedResponse r = call("POST", "/tokenize", json{{"prompt", text}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  const std::vector<int32_t> expected = *tokenizer_->encode(text);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(j["count"], expected.size());
  EXPECT_EQ(j["max_model_len"], 4096);
  r = call("POST", "/detokenize", json{{"tokens", expected}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["prompt"], text);
}

TEST_F(OperationalRoutesTest, TokenizeAddsBosOnlyWhenAskedAndConfigured) {
  const json with = json::parse(call("POST", "/tokenize", R"({"prompt":"hello"})").body);
  const json without =
      json::parse(call("POST", "/tokenize", R"({"prompt":"hello","add_special_tokens":false})").body);
  if (tokenizer_->add_bos_by_default() && tokenizer_->bos_id() >= 0) {
    ASSERT_EQ(with["tokens"].size(), without["tokens"].size() + 1);
    EXPECT_EQ(with["tokens"][0], tokenizer_->bos_id());
  } else {
    EXPECT_EQ(with["tokens"], without["tokens"]);
  }
}

TEST_F(OperationalRoutesTest, ValidationErrorsName400Fields) {
  struct Case {
    const char* path;
    const char* body;
    const char* param;
  };
  for (const Case& c :
       {Case{"/tokenize", "{", "body"}, Case{"/tokenize", "[1]", "body"},
        Case{"/tokenize", R"({"prompt":5})", "prompt"},
        Case{"/tokenize", R"({"prompt":"x","add_special_tokens":"yes"})", "add_special_tokens"},
        Case{"/tokenize", R"({"messages":[]})", "messages"},
        Case{"/detokenize", R"({"tokens":"x"})", "tokens"},
        Case{"/detokenize", R"({"tokens":[1,-1]})", "tokens[1]"},
        Case{"/detokenize", R"({"tokens":[1,99999999]})", "tokens[1]"},
        Case{"/detokenize", R"({"tokens":[1.5]})", "tokens[0]"}}) {
    ParsedResponse r = call("POST", c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.path << " " << c.body;
    EXPECT_EQ(json::parse(r.body)["error"]["param"], c.param) << c.path << " " << c.body << " -> " << r.body;
  }
  // Invalid UTF-8 inside a JSON string is bad JSON for nlohmann: 400 on body.
  EXPECT_EQ(call("POST", "/tokenize", "{\"prompt\":\"\xff\"}").status, 400);
}

// /tokenize with messages on a V3 encoding. The tiny tokenizer gets V3's template markers as added
// tokens (ids 400..), so the expected ids are spelled from the V3 template and Tokenizer::encode,
// independently of the recipe's renderer.
class TokenizeMessagesTest : public ::testing::Test {
 protected:
  static constexpr int32_t kBosId = 400, kEosId = 401, kUserId = 402, kAssistantId = 403;

  void SetUp() override {
    json tj = json::parse(ds::testing::tiny_tokenizer_json());
    const auto add = [&tj](int32_t id, const char* content) {
      tj["added_tokens"].push_back({{"id", id},
                                    {"content", content},
                                    {"single_word", false},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"special", true}});
      tj["model"]["vocab"][content] = id;
    };
    add(kBosId, "<｜begin▁of▁sentence｜>");
    add(kEosId, "<｜end▁of▁sentence｜>");
    add(kUserId, "<｜User｜>");
    add(kAssistantId, "<｜Assistant｜>");
    auto tok = Tokenizer::from_json(tj.dump(), ds::testing::tiny_tokenizer_config_json(), "tiny-v3");
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(tok).value());
    OperationalRoutesConfig oc;
    oc.model_id = "tiny";
    oc.max_model_len = 512;
    oc.tokenizer = tokenizer_.get();
    oc.chat_encoding = recipe::PromptEncodingKind::deepseek_v3;
    oc.conversion.default_thinking = false;
    oc.conversion.limits.max_messages = 4;
    RouteTable router;
    ASSERT_TRUE(add_operational_routes(router, oc).ok());
    ServerConfig sc;
    sc.host = "127.0.0.1";
    auto server = HttpServer::start(std::move(sc), std::move(router), Logger(LogLevel::off), nullptr);
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
  }

  ParsedResponse tokenize(const std::string& body) {
    RawConnection c = RawConnection::connect_local(server_->port());
    EXPECT_TRUE(c.send_all(fmt::format("POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{}",
                                       body.size(), body)));
    auto r = c.read_response();
    EXPECT_TRUE(r);
    return r.value_or(ParsedResponse{});
  }

  std::vector<int32_t> plain(const std::string& text) const {
    return *tokenizer_->encode(text, /*parse_special=*/false);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TokenizeMessagesTest, RendersTheChatTemplate) {
  ParsedResponse r =
      tokenize(R"({"model":"tiny","messages":[{"role":"system","content":"be brief"},)"
               R"({"role":"user","content":"hello the 12"},{"role":"assistant","content":"12"},)"
               R"({"role":"user","content":"<｜User｜> again"}],"add_generation_prompt":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  // V3: BOS, system text, then <｜User｜>text / <｜Assistant｜>text<｜end▁of▁sentence｜> turns, ending
  // with the opening of the assistant turn. A marker typed by the user stays plain text.
  std::vector<int32_t> expected{kBosId};
  for (int32_t id : plain("be brief")) expected.push_back(id);
  expected.push_back(kUserId);
  for (int32_t id : plain("hello the 12")) expected.push_back(id);
  expected.push_back(kAssistantId);
  for (int32_t id : plain("12")) expected.push_back(id);
  expected.push_back(kEosId);
  expected.push_back(kUserId);
  for (int32_t id : plain("<｜User｜> again")) expected.push_back(id);
  expected.push_back(kAssistantId);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(j["count"], expected.size());
  EXPECT_EQ(j["max_model_len"], 512);
}

TEST_F(TokenizeMessagesTest, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {
           Case{R"({"prompt":"x","messages":[{"role":"user","content":"a"}]})", "prompt"},
           Case{R"({"messages":[{"role":"user","content":"a"}],"add_generation_prompt":false})",
                "add_generation_prompt"},
           Case{R"({"messages":[{"role":"user","content":"a"}],"add_generation_prompt":1})",
                "add_generation_prompt"},
           Case{R"({"messages":[{"role":"user","content":"a"}],"continue_final_message":true})",
                "continue_final_message"},
           Case{R"({"messages":[{"role":"user","content":"a"}],"add_special_tokens":"no"})",
                "add_special_tokens"},
           Case{R"({"messages":[{"role":"robot","content":"a"}]})", "messages[0].role"},
           Case{R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
           Case{R"({"messages":"hi"})", "messages"},
           // The server's limits apply as on the chat route (max_messages is 4 here).
           Case{R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},)"
                R"({"role":"user","content":"c"},{"role":"assistant","content":"d"},)"
                R"({"role":"user","content":"e"}]})",
                "messages"},
       }) {
    ParsedResponse r = tokenize(c.body);
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["param"], c.param) << c.body << " -> " << r.body;
  }
}

}  // namespace
}  // namespace ds::server
