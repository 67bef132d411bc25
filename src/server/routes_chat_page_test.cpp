#include "server/routes_chat_page.h"

#include <gtest/gtest.h>

#include "http/http_server.h"
#include "http/test_http_client.h"

namespace ds::server {
namespace {

using testing::RawConnection;

TEST(ChatPageRoute, ServesThePageWithoutAKeyAndOnlyOnGet) {
  const std::string page = "<!doctype html><title>chat</title><p>hello</p>";
  RouteTable router;
  ASSERT_TRUE(add_chat_page_route(router, page).ok());
  EXPECT_FALSE(add_chat_page_route(router, page).ok()) << "a second / must clash";
  ServerConfig sc;
  sc.host = "127.0.0.1";
  sc.api_keys = *ApiKeySet::from_keys({"sk-test"});
  auto server = HttpServer::start(std::move(sc), std::move(router), Logger(LogLevel::off), nullptr);
  ASSERT_TRUE(server.ok());
  auto get = [&](const std::string& method) {
    RawConnection c = RawConnection::connect_local((*server)->port());
    EXPECT_TRUE(c.send_all(method + " / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
    return c.read_response().value_or(testing::ParsedResponse{});
  };
  const testing::ParsedResponse r = get("GET");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, page);
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.header("content-security-policy").find("connect-src 'self'"), std::string::npos);
  EXPECT_EQ(get("POST").status, 405);
  (*server)->shutdown();
}

}  // namespace
}  // namespace ds::server
