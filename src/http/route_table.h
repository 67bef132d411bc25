// RouteTable: method + exact path -> handler. The app registers its routes before the server starts; the
// server owns the router afterwards and only reads it (no locking needed).
//
// Access is default-deny (serving-anchors §5.3): every route needs an API key when keys are configured,
// except `operational` routes (health, ready, metrics), which ServerConfig may open, and `admin` routes,
// which do not exist unless ServerConfig::enable_admin_routes is set.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/http_error.h"
#include "http/response_channel.h"
#include "http/server_request.h"

namespace ds::server {

// Handlers run on an io thread: they must not block (hand work to the engine and answer through the
// channel later). Exceptions escaping a handler are caught at the server boundary and become 500.
class RouteHandler {
 public:
  virtual ~RouteHandler() = default;
  virtual void handle(ServerRequest request, std::shared_ptr<ResponseChannel> response) = 0;
};

using HandlerFn = std::function<void(ServerRequest, std::shared_ptr<ResponseChannel>)>;
std::shared_ptr<RouteHandler> make_handler(HandlerFn fn);

enum class RouteAccess { api_key, operational, admin };

struct RouteOptions {
  ErrorStyle error_style = ErrorStyle::openai;
  RouteAccess access = RouteAccess::api_key;
};

struct Route {
  std::string method;
  std::string path;
  RouteOptions options;
  std::shared_ptr<RouteHandler> handler;
};

class RouteTable {
 public:
  // invalid_argument for a duplicate method+path, a path not starting with '/', or a null handler.
  Status add(std::string method, std::string path, RouteOptions options,
             std::shared_ptr<RouteHandler> handler);
  Status add(std::string method, std::string path, RouteOptions options, HandlerFn fn) {
    return add(std::move(method), std::move(path), options, make_handler(std::move(fn)));
  }

  struct Match {
    enum class Kind { found, not_found, method_not_allowed };
    Kind kind = Kind::not_found;
    const Route* route = nullptr;  // when found
    std::string allow;             // when method_not_allowed: "GET, POST"
  };
  // `include_admin`: whether admin routes exist (off: they answer 404 like unknown paths).
  Match match(std::string_view method, std::string_view path, bool include_admin) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;  // a dozen routes: a linear scan beats hashing here
};

}  // namespace ds::server
