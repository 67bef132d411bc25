#include "http/server_request.h"

#include <strings.h>

namespace ds::server {

std::optional<std::string_view> ServerRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), name.size()) == 0)
      return std::string_view(v);
  }
  return std::nullopt;
}

}  // namespace ds::server
