#include "http/http_wire.h"

#include <fmt/format.h>

#include <boost/beast/http/status.hpp>

namespace ds::server {
namespace {

bool has_crlf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

std::string_view reason_phrase(int http_status) {
  if (http_status == 499) return "Client Closed Request";
  const auto reason = boost::beast::http::obsolete_reason(
      boost::beast::http::int_to_status(static_cast<unsigned>(http_status)));
  return std::string_view(reason.data(), reason.size());
}

}  // namespace

std::string response_head(int http_status, const HeaderList& headers) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", http_status, reason_phrase(http_status));
  for (const auto& [name, value] : headers) {
    if (name.empty() || has_crlf(name) || has_crlf(value)) continue;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string chunk_frame(std::string_view payload) {
  if (payload.empty()) return {};
  return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
}

std::string sse_event_text(std::string_view data, std::string_view event) {
  std::string out;
  if (!event.empty() && !has_crlf(event)) out += fmt::format("event: {}\n", event);
  size_t start = 0;
  while (true) {
    size_t nl = data.find('\n', start);
    std::string_view line =
        data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out += "data: ";
    out += line;
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

}  // namespace ds::server
