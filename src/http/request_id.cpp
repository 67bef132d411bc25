#include "http/request_id.h"

#include <fmt/format.h>

#include <random>

namespace ds::server {

bool is_acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

RequestIdGenerator::RequestIdGenerator() {
  std::random_device rd;
  prefix_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string RequestIdGenerator::next() {
  const uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
  return fmt::format("req-{:016x}{:012x}", prefix_, n & 0xffffffffffffull);
}

}  // namespace ds::server
