#include "server/routes_chat_page.h"

#include <memory>
#include <string>

namespace ds::server {

Status add_chat_page_route(RouteTable& router, std::string_view html) {
  const RouteOptions options{.error_style = ErrorStyle::openai, .access = RouteAccess::operational};
  return router.add("GET", "/", options, [html](ServerRequest, std::shared_ptr<ResponseChannel> out) {
    out->send(
        200, "text/html; charset=utf-8", std::string(html),
        {{"Cache-Control", "no-store"},
         {"X-Content-Type-Options", "nosniff"},
         {"Content-Security-Policy",
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
          "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}});
  });
}

}  // namespace ds::server
