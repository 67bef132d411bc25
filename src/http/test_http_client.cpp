#include "http/test_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <filesystem>

namespace ds::server::testing {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

RawConnection RawConnection::connect_local(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return RawConnection(UniqueFd());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return RawConnection(UniqueFd());
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return RawConnection(std::move(fd));
}

bool RawConnection::send_all(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

int RawConnection::fill(std::chrono::milliseconds timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r == 0) return 0;
  if (r < 0) return -1;
  char tmp[16384];
  const ssize_t n = ::recv(fd_.get(), tmp, sizeof(tmp), 0);
  if (n <= 0) return -1;
  buf_.append(tmp, static_cast<size_t>(n));
  return 1;
}

bool RawConnection::need(size_t n, std::chrono::steady_clock::time_point deadline) {
  while (buf_.size() < n) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || fill(left) <= 0) return false;
  }
  return true;
}

std::optional<std::string> RawConnection::take_line(std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const size_t pos = buf_.find("\r\n");
    if (pos != std::string::npos) {
      std::string line = buf_.substr(0, pos);
      buf_.erase(0, pos + 2);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || fill(left) <= 0) return std::nullopt;
  }
}

std::optional<ParsedResponse> RawConnection::read_response(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ParsedResponse r;
  auto status_line = take_line(deadline);
  if (!status_line || status_line->size() < 12 || !status_line->starts_with("HTTP/1.1 ")) return std::nullopt;
  r.status = std::stoi(status_line->substr(9, 3));
  while (true) {
    auto line = take_line(deadline);
    if (!line) return std::nullopt;
    if (line->empty()) break;
    const size_t colon = line->find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string value = line->substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r.headers[lower(line->substr(0, colon))] = value;
  }
  if (r.status == 100) return read_response(timeout);
  if (lower(r.header("transfer-encoding")) == "chunked") {
    r.chunked = true;
    while (true) {
      auto size_line = take_line(deadline);
      if (!size_line) return std::nullopt;
      const size_t size = std::stoul(*size_line, nullptr, 16);
      if (!need(size + 2, deadline)) return std::nullopt;
      r.body.append(buf_, 0, size);
      buf_.erase(0, size + 2);
      if (size == 0) break;
    }
    return r;
  }
  const size_t length = r.headers.count("content-length") ? std::stoul(r.header("content-length")) : 0;
  if (!need(length, deadline)) return std::nullopt;
  r.body = buf_.substr(0, length);
  buf_.erase(0, length);
  return r;
}

bool RawConnection::read_until(std::string_view needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (buf_.find(needle) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || fill(left) <= 0) return false;
  }
  return true;
}

bool RawConnection::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int r = fill(left);
    if (r < 0) return true;
    if (r == 0) return false;
    buf_.clear();
  }
}

std::vector<SseEvent> parse_sse(std::string_view body) {
  std::vector<SseEvent> events;
  SseEvent cur;
  bool has_data = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string_view::npos) nl = body.size();
    const std::string_view line = body.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) {
      if (has_data || !cur.event.empty()) events.push_back(cur);
      cur = {};
      has_data = false;
    } else if (line.starts_with("event: ")) {
      cur.event = std::string(line.substr(7));
    } else if (line.starts_with("data: ")) {
      if (has_data) cur.data += '\n';
      cur.data += line.substr(6);
      has_data = true;
    }
  }
  return events;
}

int count_process_threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

}  // namespace ds::server::testing
