// Test-only: a blocking raw-socket HTTP/1.1 client, so the server tests control every byte (pipelining,
// malformed requests, slow senders, half-read streams) instead of trusting a client library.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"

namespace ds::server::testing {

struct ParsedResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
  bool chunked = false;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class RawConnection {
 public:
  // Connects to 127.0.0.1:port; an invalid connection (fd < 0) on failure.
  static RawConnection connect_local(uint16_t port);
  bool ok() const { return fd_.valid(); }
  bool send_all(std::string_view bytes);
  // One response (Content-Length or chunked body); nullopt on timeout, close or a parse failure.
  std::optional<ParsedResponse> read_response(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Reads until the buffered bytes contain `needle` (kept buffered); false on timeout/close.
  bool read_until(std::string_view needle, std::chrono::milliseconds timeout);
  // True when the peer closes (recv returns 0 or an error) within `timeout`; buffered data is discarded.
  bool wait_closed(std::chrono::milliseconds timeout);
  const std::string& buffered() const { return buf_; }
  void close() { fd_.reset(); }

 private:
  explicit RawConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  // Appends what arrives within `timeout`; 0 on timeout, -1 on close/error.
  int fill(std::chrono::milliseconds timeout);
  bool need(size_t n, std::chrono::steady_clock::time_point deadline);
  std::optional<std::string> take_line(std::chrono::steady_clock::time_point deadline);

  UniqueFd fd_;
  std::string buf_;
};

// Splits an SSE body into events: each {event name ("" when none), data (data: lines joined by '\n')}.
struct SseEvent {
  std::string event;
  std::string data;
};
std::vector<SseEvent> parse_sse(std::string_view body);

// Number of threads of this process (/proc/self/task).
int count_process_threads();

}  // namespace ds::server::testing
