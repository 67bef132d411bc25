// What a route handler receives: one parsed HTTP request. The body is passed as received (bytes, not
// validated as UTF-8 or JSON: that is the handler's job, and its errors map to 400 through http_error).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::server {

struct ServerRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query, e.g. "/v1/chat/completions"
  std::string query;   // after '?', undecoded ("" when none)
  std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
  std::string body;
  std::string request_id;   // from a sane X-Request-Id or generated; echoed in the response
  std::string remote_addr;  // "127.0.0.1:51234"

  // First header named `name` (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

}  // namespace ds::server
