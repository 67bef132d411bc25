#include "server/router.h"

#include <gtest/gtest.h>

#include "server/api_routes.h"

namespace ds::server {
namespace {

HandlerFn noop() {
  return [](ServerRequest, std::shared_ptr<ResponseChannel>) {};
}

TEST(Router, MatchesMethodAndExactPath) {
  Router r;
  ASSERT_TRUE(r.add("POST", "/v1/chat/completions", {}, noop()).ok());
  ASSERT_TRUE(r.add("GET", "/v1/models", {}, noop()).ok());
  const auto m = r.match("POST", "/v1/chat/completions", false);
  ASSERT_EQ(m.kind, Router::Match::Kind::found);
  EXPECT_EQ(m.route->path, "/v1/chat/completions");
  EXPECT_EQ(r.match("POST", "/v1/chat/completions/", false).kind, Router::Match::Kind::not_found);
  EXPECT_EQ(r.match("POST", "/v1/chat", false).kind, Router::Match::Kind::not_found);
}

TEST(Router, WrongMethodListsTheAllowedOnes) {
  Router r;
  ASSERT_TRUE(r.add("POST", "/tokenize", {}, noop()).ok());
  ASSERT_TRUE(r.add("PUT", "/tokenize", {}, noop()).ok());
  const auto m = r.match("GET", "/tokenize", false);
  EXPECT_EQ(m.kind, Router::Match::Kind::method_not_allowed);
  EXPECT_EQ(m.allow, "POST, PUT");
}

TEST(Router, RejectsDuplicatesBadPathsAndNullHandlers) {
  Router r;
  ASSERT_TRUE(r.add("GET", "/health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "/health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "health", {}, noop()).ok());
  EXPECT_FALSE(r.add("GET", "/x", {}, std::shared_ptr<RouteHandler>()).ok());
}

TEST(Router, AdminRoutesExistOnlyWhenEnabled) {
  Router r;
  RouteOptions admin;
  admin.access = RouteAccess::admin;
  ASSERT_TRUE(r.add("POST", "/admin/reload", admin, noop()).ok());
  EXPECT_EQ(r.match("POST", "/admin/reload", false).kind, Router::Match::Kind::not_found);
  EXPECT_EQ(r.match("GET", "/admin/reload", false).kind, Router::Match::Kind::not_found);
  EXPECT_EQ(r.match("POST", "/admin/reload", true).kind, Router::Match::Kind::found);
}

}  // namespace
}  // namespace ds::server

namespace ds::server {
namespace {

TEST(ApiRoutes, TableStylesAgreeWithThePathRuleAndRegisterCleanly) {
  Router r;
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
