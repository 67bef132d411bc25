// Request ids: echoed in X-Request-Id and logged with every error, so a client's report can be matched
// to the server log. A client-supplied id is kept when it is short and harmless (it lands in logs).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::server {

// True for 1..128 characters of [A-Za-z0-9._:-].
bool is_acceptable_request_id(std::string_view id);

// Per-server generator: "req-<16 hex random per server><12 hex counter>", unique within the process
// and unlikely to collide across restarts.
class RequestIdGenerator {
 public:
  RequestIdGenerator();
  std::string next();

 private:
  uint64_t prefix_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace ds::server
