// API keys: a set of secrets a request must present one of (vLLM CVE-2025-59425: compare in constant
// time). Keys come from the CLI (--api-key, repeatable) or a file (--api-key-file: one key per line,
// blank lines and lines starting with '#' ignored, surrounding whitespace trimmed).
// The presented key is read from `Authorization: Bearer <key>` or `x-api-key: <key>`; when both are
// sent, Bearer wins (DeepSeek's Anthropic endpoint does the same).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::server {

// Equality whose running time depends only on the lengths of a and b, never on where they differ.
bool constant_time_equal(std::string_view a, std::string_view b);

class ApiKeySet {
 public:
  ApiKeySet() = default;
  // invalid_argument for an empty key or one with whitespace/control characters (a pasted newline would
  // otherwise become part of the key).
  static Result<ApiKeySet> from_keys(std::vector<std::string> keys);
  // io_error when the file cannot be read; invalid_argument when it holds no key or a malformed one.
  static Result<ApiKeySet> from_file(const std::string& path);
  // Adds the keys of `other` (CLI keys plus file keys).
  void merge(const ApiKeySet& other);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // True when `presented` equals one of the keys. Every key is compared (no early exit), so the time
  // does not reveal which key matched or how long a matching prefix was.
  bool matches(std::string_view presented) const;

 private:
  std::vector<std::string> keys_;
};

// The key a request presents, from its header values (nullopt when neither header carries one).
// `authorization` is the raw Authorization value; the scheme "Bearer" is matched case-insensitively.
std::optional<std::string_view> presented_api_key(std::string_view authorization, std::string_view x_api_key);

}  // namespace ds::server
