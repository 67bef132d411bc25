#include "tokenizer/utf8.h"

namespace ds::utf8 {
namespace {

// Number of bytes of the longest prefix of text[pos..] that could still begin a well-formed
// character (the "maximal subpart" of Unicode §3.9), and whether that prefix is a complete char.
struct Subpart {
  size_t n_bytes;
  bool complete;
};

Subpart maximal_subpart(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return {1, true};
  size_t n_needed;
  uint8_t second_lo = 0x80;
  uint8_t second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n_needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n_needed = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // excludes overlong forms
    if (lead == 0xED) second_hi = 0x9F;  // excludes surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n_needed = 4;
    if (lead == 0xF0) second_lo = 0x90;  // excludes overlong forms
    if (lead == 0xF4) second_hi = 0x8F;  // excludes > U+10FFFF
  } else {
    return {0, false};  // continuation byte, C0/C1 or F5..FF: never starts a character
  }
  size_t n_ok = 1;
  while (n_ok < n_needed && pos + n_ok < text.size()) {
    const uint8_t b = byte(pos + n_ok);
    const uint8_t lo = n_ok == 1 ? second_lo : 0x80;
    const uint8_t hi = n_ok == 1 ? second_hi : 0xBF;
    if (b < lo || b > hi) break;
    ++n_ok;
  }
  return {n_ok, n_ok == n_needed};
}

}  // namespace

size_t char_length_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const Subpart s = maximal_subpart(text, pos);
  return s.complete ? s.n_bytes : 0;
}

size_t first_invalid_offset(std::string_view text) {
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    // ASCII fast path, 8 bytes at a time: most text is mostly ASCII.
    while (pos + 8 <= n) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= n) break;
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t len = char_length_at(text, pos);
    if (len == 0) return pos;
    pos += len;
  }
  return kValid;
}

size_t incomplete_tail_length(std::string_view bytes) {
  const size_t n = bytes.size();
  // A character is at most 4 bytes, so an incomplete one starts within the last 3 bytes.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const uint8_t b = static_cast<uint8_t>(bytes[start]);
    if (b >= 0x80 && b < 0xC0) continue;  // continuation byte: the lead is further back
    const Subpart s = maximal_subpart(bytes, start);
    return (!s.complete && s.n_bytes == back) ? back : 0;
  }
  return 0;
}

void append_lossy(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  size_t run_start = 0;  // start of the pending run of well-formed bytes
  while (pos < bytes.size()) {
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Subpart s = maximal_subpart(bytes, pos);
    if (s.complete) {
      pos += s.n_bytes;
      continue;
    }
    out.append(bytes.substr(run_start, pos - run_start));
    out.append(kReplacement);
    pos += s.n_bytes == 0 ? 1 : s.n_bytes;
    run_start = pos;
  }
  out.append(bytes.substr(run_start));
}

std::string to_valid_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_lossy(bytes, out);
  return out;
}

void append_codepoint(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace ds::utf8
