#include "http/http_error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ds::server {
namespace {

using nlohmann::json;

TEST(HttpError, UserErrorsAre400WithTheFieldAsParam) {
  const Status s(ErrorCode::invalid_argument, "messages[2].content: expected string or array");
  const HttpError e = http_error_from_status(s, ErrorStyle::openai, 1);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, "messages[2].content");
  EXPECT_EQ(e.retry_after_s, 0);
  const json body = json::parse(error_body(e, ErrorStyle::openai));
  EXPECT_EQ(body["error"]["message"], "messages[2].content: expected string or array");
  EXPECT_EQ(body["error"]["param"], "messages[2].content");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["code"].is_string());
}

TEST(HttpError, SentenceMessagesHaveNullParam) {
  const Status s(ErrorCode::engine_bad_request, "prompt is too long: 9000 tokens > 8192");
  const HttpError e = http_error_from_status(s, ErrorStyle::openai, 1);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_TRUE(json::parse(error_body(e, ErrorStyle::openai))["error"]["param"].is_null());
}

TEST(HttpError, StatusTable) {
  struct Case {
    ErrorCode code;
    int http_status;
    bool retry_after;
  };
  const Case cases[] = {
      {ErrorCode::recipe_bad_request, 400, false},
      {ErrorCode::recipe_unsupported, 400, false},
      {ErrorCode::tokenizer_bad_input, 400, false},
      {ErrorCode::grammar_bad_input, 400, false},
      {ErrorCode::grammar_unsupported, 400, false},
      {ErrorCode::grammar_too_large, 400, false},
      {ErrorCode::grammar_empty, 400, false},
      {ErrorCode::server_unauthorized, 401, false},
      {ErrorCode::server_not_found, 404, false},
      {ErrorCode::not_found, 404, false},
      {ErrorCode::server_payload_too_large, 413, false},
      {ErrorCode::engine_overloaded, 429, true},
      {ErrorCode::engine_shutting_down, 503, true},
      {ErrorCode::kvcache_out_of_blocks, 503, true},
      {ErrorCode::engine_deadline_exceeded, 504, false},
      {ErrorCode::internal, 500, false},
      {ErrorCode::io_error, 500, false},
      {ErrorCode::weights_bad_header, 500, false},
  };
  for (const Case& c : cases) {
    for (ErrorStyle style : {ErrorStyle::openai, ErrorStyle::anthropic}) {
      const HttpError e = http_error_from_status(Status(c.code, "m"), style, 7);
      EXPECT_EQ(e.http_status, c.http_status) << error_code_name(c.code);
      EXPECT_EQ(e.retry_after_s, c.retry_after ? 7 : 0) << error_code_name(c.code);
      EXPECT_FALSE(e.type.empty());
    }
  }
}

TEST(HttpError, InternalErrorsDoNotLeakTheMessage) {
  const Status s(ErrorCode::io_error, "/secret/path/model.safetensors: read failed");
  for (ErrorStyle style : {ErrorStyle::openai, ErrorStyle::anthropic}) {
    const HttpError e = http_error_from_status(s, style, 1);
    EXPECT_EQ(e.http_status, 500);
    const std::string body = error_body(e, style);
    EXPECT_EQ(body.find("secret"), std::string::npos) << body;
    EXPECT_NE(body.find("internal server error"), std::string::npos);
  }
}

TEST(HttpError, AnthropicShape) {
  const HttpError e =
      http_error_from_status(Status(ErrorCode::engine_overloaded, "queue full"), ErrorStyle::anthropic, 2);
  const json body = json::parse(error_body(e, ErrorStyle::anthropic));
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "overloaded_error");
  EXPECT_EQ(body["error"]["message"], "queue full");
  EXPECT_EQ(body.size(), 2u);
  EXPECT_EQ(body["error"].size(), 2u);
  EXPECT_EQ(not_found_error(ErrorStyle::anthropic, "GET", "/x").type, "not_found_error");
  EXPECT_EQ(unauthorized_error(ErrorStyle::anthropic).type, "authentication_error");
  EXPECT_EQ(payload_too_large_error(ErrorStyle::anthropic, 10).type, "request_too_large");
}

TEST(HttpError, OpenAiShapeHasExactlyFourKeys) {
  const json body =
      json::parse(error_body(not_found_error(ErrorStyle::openai, "GET", "/nope"), ErrorStyle::openai));
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body["error"].size(), 4u);
  EXPECT_EQ(body["error"]["message"], "no route for GET /nope");
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(body["error"]["code"], "not_found");
}

TEST(HttpError, InvalidUtf8InAMessageStillGivesValidJson) {
  const Status s(ErrorCode::invalid_argument, std::string("model: unknown model '\xff\xfe'"));
  const std::string body = error_body(http_error_from_status(s, ErrorStyle::openai, 1), ErrorStyle::openai);
  EXPECT_TRUE(json::accept(body)) << body;
}

TEST(HttpError, SseErrorEvents) {
  const HttpError e =
      http_error_from_status(Status(ErrorCode::engine_shutting_down, "bye"), ErrorStyle::openai, 1);
  const std::string openai = sse_error_event(e, ErrorStyle::openai);
  EXPECT_TRUE(openai.starts_with("data: {\"error\":"));
  EXPECT_TRUE(openai.ends_with("\n\n"));
  const std::string anthropic = sse_error_event(e, ErrorStyle::anthropic);
  EXPECT_TRUE(anthropic.starts_with("event: error\ndata: {"));
  EXPECT_EQ(json::parse(anthropic.substr(anthropic.find('{')))["type"], "error");
}

TEST(HttpError, StyleForPath) {
  EXPECT_EQ(error_style_for_path("/v1/messages"), ErrorStyle::anthropic);
  EXPECT_EQ(error_style_for_path("/v1/messages/count_tokens"), ErrorStyle::anthropic);
  EXPECT_EQ(error_style_for_path("/anthropic/v1/messages"), ErrorStyle::anthropic);
  EXPECT_EQ(error_style_for_path("/v1/chat/completions"), ErrorStyle::openai);
  EXPECT_EQ(error_style_for_path("/nope"), ErrorStyle::openai);
}

}  // namespace
}  // namespace ds::server
