#include "http/http_wire.h"

#include <gtest/gtest.h>

namespace ds::server {
namespace {

TEST(HttpWire, ResponseHeadDropsHeadersWithLineBreaks) {
  const std::string head =
      response_head(200, {{"A", "1"}, {"Evil", "x\r\nSet-Cookie: y"}, {"Bad\nName", "z"}, {"B", "2"}});
  EXPECT_EQ(head, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n");
  EXPECT_TRUE(response_head(429, {}).starts_with("HTTP/1.1 429 Too Many Requests\r\n"));
  EXPECT_TRUE(response_head(499, {}).starts_with("HTTP/1.1 499 "));
}

TEST(HttpWire, ChunkFraming) {
  EXPECT_EQ(chunk_frame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(chunk_frame(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(chunk_frame(""), "");  // an empty chunk would end the body
}

TEST(HttpWire, SseEvents) {
  EXPECT_EQ(sse_event_text("{\"a\":1}", ""), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event_text("[DONE]", ""), "data: [DONE]\n\n");
  EXPECT_EQ(sse_event_text("x", "message_start"), "event: message_start\ndata: x\n\n");
  EXPECT_EQ(sse_event_text("l1\nl2\r\nl3", ""), "data: l1\ndata: l2\ndata: l3\n\n");
  EXPECT_EQ(sse_event_text("", ""), "data: \n\n");
}

}  // namespace
}  // namespace ds::server
