#include "http/api_keys.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace ds::server {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Status check_key(std::string_view key) {
  if (key.empty()) return Status(ErrorCode::invalid_argument, "API key is empty");
  for (unsigned char c : key) {
    if (c <= 0x20 || c == 0x7f) {
      return Status(ErrorCode::invalid_argument, "API key contains whitespace or a control character");
    }
  }
  return ok_status();
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length so a short guess costs as much as a full one; the length difference itself
  // folds into the result.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(ca ^ cb);
  }
  // volatile keeps the compiler from turning the accumulated OR back into an early-exit compare.
  volatile unsigned result = diff;
  return result == 0;
}

Result<ApiKeySet> ApiKeySet::from_keys(std::vector<std::string> keys) {
  for (const std::string& k : keys) DS_TRY(check_key(k));
  ApiKeySet set;
  set.keys_ = std::move(keys);
  return set;
}

Result<ApiKeySet> ApiKeySet::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::io_error, fmt::format("cannot read API key file '{}'", path));
  std::vector<std::string> keys;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    if (Status s = check_key(key); !s.ok()) {
      // The key itself is never echoed: it is a secret.
      return Status(ErrorCode::invalid_argument, fmt::format("{}:{}: {}", path, line_no, s.message()));
    }
    keys.emplace_back(key);
  }
  if (keys.empty())
    return Status(ErrorCode::invalid_argument, fmt::format("API key file '{}' holds no key", path));
  ApiKeySet set;
  set.keys_ = std::move(keys);
  return set;
}

void ApiKeySet::merge(const ApiKeySet& other) {
  keys_.insert(keys_.end(), other.keys_.begin(), other.keys_.end());
}

bool ApiKeySet::matches(std::string_view presented) const {
  bool any = false;
  for (const std::string& key : keys_) any |= constant_time_equal(key, presented);
  return any;
}

std::optional<std::string_view> presented_api_key(std::string_view authorization,
                                                  std::string_view x_api_key) {
  authorization = trim(authorization);
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() > kBearer.size()) {
    bool is_bearer = true;
    for (size_t i = 0; i < kBearer.size(); ++i) {
      const char c = authorization[i];
      const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      is_bearer &= lower == kBearer[i];
    }
    if (is_bearer) {
      const std::string_view token = trim(authorization.substr(kBearer.size()));
      if (!token.empty()) return token;
    }
  }
  x_api_key = trim(x_api_key);
  if (!x_api_key.empty()) return x_api_key;
  return std::nullopt;
}

}  // namespace ds::server
