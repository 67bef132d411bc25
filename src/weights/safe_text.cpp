#include "weights/safe_text.h"

#include <cstdint>
#include <cstdio>

namespace ds {

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;  // continuation byte first, overlong 2-byte lead (c0/c1), or f5..ff
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0u) != 0x80u) return false;
      cp = (cp << 6) | (p[i + k] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;  // overlong
    if (cp >= 0xd800 && cp <= 0xdfff) return false;                            // surrogate
    if (cp > 0x10ffff) return false;
    i += len;
  }
  return true;
}

std::string quoted_for_message(std::string_view s) {
  constexpr size_t kMaxBytes = 200;
  std::string out = "'";
  size_t n = s.size() < kMaxBytes ? s.size() : kMaxBytes;
  while (n > 0 && n < s.size() && (static_cast<uint8_t>(s[n]) & 0xc0u) == 0x80u) --n;  // whole UTF-8 chars
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...";
  return out + "'";
}

}  // namespace ds
