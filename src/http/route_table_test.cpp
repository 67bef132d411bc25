#include "http/route_table.h"

#include <gtest/gtest.h>

#include "http/api_routes.h"

namespace ds::server {
namespace {

HandlerFn noop() {
  return [](ServerRequest, std::shared_ptr<ResponseChannel>) {};
}

TEST(RouteTable, MatchesMethodAndExactPath) {
  RouteTable r;
  ASSERT_TRUE(r.add("POST", "/v1/chat/completions", {}, noop()).ok());
  ASSERT_TRUE(r.add("GET", "/v1/models", {}, noop()).ok());
  const auto m = r.match("POST", "/v1/chat/completions", false);
  ASSERT_EQ(m.kind, RouteTable::Match::Kind::found);
  EXPECT_EQ(m.route->path, "/v1/chat/completions");
  EXPECT_EQ(r.match("POST", "/v1/chat/completions/", false).kind, RouteTable::Match::Kind::not_found);
  EXPECT_EQ(r.match("POST", "/v1/chat", false).kind, RouteTable::Match::Kind::not_found);
}

TEST(RouteTable, WrongMethodListsTheAllowedOnes) {
  RouteTable r;
  ASSERT_TRUE(r.add("POST", "/tokenize", {}, noop()).ok());
  ASSERT_TRUE(r.add("PUT", "/tokenize", {}, noop()).ok());
  const auto m = r.match("GET", "/tokenize", false);
  EXPECT_EQ(m.kind, RouteTable::Match::Kind::method_not_allowed);
  EXPECT_EQ(m.allow, "POST, PUT");
}

TEST(RouteTable, RejectsDuplicatesBadPathsAndNullHandlers) {
  RouteTable r;
  ASSERT_TRUE(r.add("GET", "/health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "/health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "/x", {}, std::shared_ptr<RouteHandler>()).ok());
}

TEST(RouteTable, AdminRoutesExistOnlyWhenEnabled) {
  RouteTable r;
  RouteOptions admin;
  admin.access = RouteAccess::admin;
  ASSERT_TRUE(r.add("POST", "/admin/reload", admin, noop()).ok());
  EXPECT_EQ(r.match("POST", "/admin/reload", false).kind, RouteTable::Match::Kind::not_found);
  EXPECT_EQ(r.match("GET", "/admin/reload", false).kind, RouteTable::Match::Kind::not_found);
  EXPECT_EQ(r.match("POST", "/admin/reload", true).kind, RouteTable::Match::Kind::found);
}

}  // namespace
}  // namespace ds::server

namespace ds::server {
namespace {

TEST(ApiRoutes, TableStylesAgreeWithThePathRuleAndRegisterCleanly) {
  RouteTable r;
  for (const ApiRoute& route : kGenerationRoutes) {
    EXPECT_EQ(route.error_style, error_style_for_path(route.path)) << route.path;
    EXPECT_TRUE(r.add(std::string(route.method), std::string(route.path),
                      {route.error_style, RouteAccess::api_key}, noop())
                    .ok())
        << route.path;
  }
  EXPECT_EQ(r.routes().size(), kGenerationRoutes.size());
}

}  // namespace
}  // namespace ds::server
