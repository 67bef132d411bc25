#include "tokenizer/unicode_delta.h"

#include <algorithm>

#include "base/assert.h"

namespace ds {

UnicodeDeltaSet::UnicodeDeltaSet() {
  for (char cls : {'L', 'M', 'N', 'P', 'S'}) {
    const std::span<const CodepointRange> r = unicode_delta_ranges(cls);
    ranges_.insert(ranges_.end(), r.begin(), r.end());
  }
  std::sort(ranges_.begin(), ranges_.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.first < b.first; });
  min_codepoint_ = ranges_.empty() ? 0x110000 : ranges_.front().first;
  DS_ASSERT(min_codepoint_ >= 0x800, "intersects() skips 1- and 2-byte characters");
}

bool UnicodeDeltaSet::contains(uint32_t codepoint) const {
  if (codepoint < min_codepoint_) return false;
  // The last range starting at or before `codepoint`.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), codepoint,
                             [](uint32_t cp, const CodepointRange& r) { return cp < r.first; });
  return it != ranges_.begin() && codepoint <= std::prev(it)->last;
}

bool UnicodeDeltaSet::intersects(std::string_view text) const {
  const size_t n = text.size();
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text[i])); };
  size_t pos = 0;
  while (pos < n) {
    const uint32_t b0 = byte(pos);
    if (b0 < 0xE0) {  // ASCII, continuation or 2-byte lead: no delta code point starts here
      ++pos;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (b0 < 0xF0) {
      len = 3;
      if (pos + len > n) break;
      cp = ((b0 & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F);
    } else {
      len = 4;
      if (pos + len > n) break;
      cp = ((b0 & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) | ((byte(pos + 2) & 0x3F) << 6) |
           (byte(pos + 3) & 0x3F);
    }
    if (contains(cp)) return true;
    pos += len;
  }
  return false;
}

}  // namespace ds
