#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace ds::grammar {

namespace {
constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kMaxOfLength[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int encode(uint32_t cp, uint8_t* out) {
  if (cp <= 0x7F) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp <= 0x7FF) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp <= 0xFFFF) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

void split(uint32_t lo, uint32_t hi, std::vector<ByteSequence>& out) {
  if (lo > hi) return;
  // Surrogates are not characters.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split(0xE000, hi, out);
    return;
  }
  // Same encoded length on both ends.
  for (int len = 0; len < 3; ++len) {
    if (lo <= kMaxOfLength[len] && hi > kMaxOfLength[len]) {
      split(lo, kMaxOfLength[len], out);
      split(kMaxOfLength[len] + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  // Align on continuation-byte boundaries: a range is one sequence when, for some i, the low 6·i bits
  // span the full 0..2^(6i)-1 on both ends and the prefixes above differ only in the last position.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  ByteSequence seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}
}  // namespace

std::vector<ByteSequence> utf8_sequences(CodepointRange range) {
  std::vector<ByteSequence> out;
  split(range.lo, std::min(range.hi, kMaxCodepoint), out);
  return out;
}

std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](auto& x, auto& y) { return x.lo < y.lo; });
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : normalize_ranges(ranges)) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

}  // namespace ds::grammar
