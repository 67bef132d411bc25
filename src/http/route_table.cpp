#include "http/route_table.h"

#include <fmt/format.h>

namespace ds::server {
namespace {

class FnHandler final : public RouteHandler {
 public:
  explicit FnHandler(HandlerFn fn) : fn_(std::move(fn)) {}
  void handle(ServerRequest request, std::shared_ptr<ResponseChannel> response) override {
    fn_(std::move(request), std::move(response));
  }

 private:
  HandlerFn fn_;
};

}  // namespace

std::shared_ptr<RouteHandler> make_handler(HandlerFn fn) {
  return std::make_shared<FnHandler>(std::move(fn));
}

Status RouteTable::add(std::string method, std::string path, RouteOptions options,
                       std::shared_ptr<RouteHandler> handler) {
  if (!handler)
    return Status(ErrorCode::invalid_argument, fmt::format("route {} {}: null handler", method, path));
  if (path.empty() || path.front() != '/') {
    return Status(ErrorCode::invalid_argument, fmt::format("route path '{}' must start with '/'", path));
  }
  for (const Route& r : routes_) {
    if (r.method == method && r.path == path) {
      return Status(ErrorCode::invalid_argument, fmt::format("route {} {} registered twice", method, path));
    }
  }
  routes_.push_back(Route{std::move(method), std::move(path), options, std::move(handler)});
  return ok_status();
}

RouteTable::Match RouteTable::match(std::string_view method, std::string_view path,
                                    bool include_admin) const {
  Match m;
  for (const Route& r : routes_) {
    if (r.path != path) continue;
    if (r.options.access == RouteAccess::admin && !include_admin) continue;
    if (r.method == method) {
      m.kind = Match::Kind::found;
      m.route = &r;
      m.allow.clear();
      return m;
    }
    m.kind = Match::Kind::method_not_allowed;
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += r.method;
  }
  return m;
}

}  // namespace ds::server
