// The client's pure parts: SSE framing and base-URL parsing (http_call itself is exercised against a
// real server by tests/tools).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "client/http_client.h"
#include "client/sse_reader.h"

namespace ds::client {
namespace {

std::vector<std::string> events_of(const std::vector<std::string>& pieces) {
  std::vector<std::string> got;
  SseReader reader([&](std::string_view d) {
    got.emplace_back(d);
    return true;
  });
  for (const std::string& p : pieces) EXPECT_TRUE(reader.feed(p));
  return got;
}

TEST(SseReader, SplitsEventsAcrossAnyChunking) {
  const std::string stream =
      "data: {\"a\":1}\n\n: comment\nevent: x\ndata: two\ndata: lines\n\ndata:[DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "two\nlines", "[DONE]"};
  EXPECT_EQ(events_of({stream}), want);
  std::vector<std::string> bytes;
  for (const char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(events_of(bytes), want);
}

TEST(SseReader, AcceptsCrLfAndCrLineEnds) {
  EXPECT_EQ(events_of({"data: a\r\n\r\ndata: b\r\r"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(events_of({"data: a\r", "\n\r", "\n"}), (std::vector<std::string>{"a"}));
}

TEST(SseReader, IgnoresEventsWithoutDataAndUnterminatedTail) {
  EXPECT_EQ(events_of({"event: ping\n\nid: 3\n\ndata: partial"}), std::vector<std::string>{});
}

TEST(SseReader, StopsWhenAsked) {
  int n = 0;
  SseReader reader([&](std::string_view) { return ++n < 2; });
  EXPECT_FALSE(reader.feed("data: 1\n\ndata: 2\n\ndata: 3\n\n"));
  EXPECT_EQ(n, 2);
}

TEST(ParseBaseUrl, HostPortAndPrefix) {
  Result<BaseUrl> u = parse_base_url("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->path_prefix, "");
  u = parse_base_url("http://example.org/proxy/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "example.org");
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->path_prefix, "/proxy");
  u = parse_base_url("http://[::1]:9000/x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
}

TEST(ParseBaseUrl, RefusesWhatItCannotServe) {
  for (const char* bad : {"https://h:1", "127.0.0.1:8000", "http://", "http://h:x1", "http://h:"}) {
    Result<BaseUrl> u = parse_base_url(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), ErrorCode::invalid_argument);
  }
}

TEST(HttpCall, RefusedConnectionIsAnIoError) {
  // Port 1 on loopback: nothing listens there in a test environment.
  const HttpCall call{.method = "GET", .path = "/health", .body = {}, .api_key = {}};
  Result<HttpAnswer> a = http_call({"127.0.0.1", "1", ""}, call);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), ErrorCode::io_error);
}

TEST(HttpCall, SilentServerTimesOut) {
  // A listening socket that never answers: the kernel completes the connection from the backlog.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const HttpCall call{
      .method = "GET", .path = "/", .body = {}, .api_key = {}, .timeout = std::chrono::milliseconds(200)};
  Result<HttpAnswer> a = http_call({"127.0.0.1", std::to_string(ntohs(addr.sin_port)), ""}, call);
  ::close(fd);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), ErrorCode::io_error);
  EXPECT_NE(a.status().message().find("timed out"), std::string::npos) << a.status().message();
}

}  // namespace
}  // namespace ds::client
