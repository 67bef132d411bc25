// GET / : the browser chat page (web/chat.html, built into the deepinfer binary and handed in by the
// app, so the server library does not carry the file). A public route like /health: the page itself
// holds no data; the page asks for an API key when the API answers 401.
//
//   GET /  200 text/html (no-store, a CSP allowing only this page's own inline script and style and
//          fetches back to this server)
#pragma once

#include <string_view>

#include "base/status.h"
#include "http/route_table.h"

namespace ds::server {

// `html` must outlive the router (it is served from there, not copied per request).
Status add_chat_page_route(RouteTable& router, std::string_view html);

}  // namespace ds::server
