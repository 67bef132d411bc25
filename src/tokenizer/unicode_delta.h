// Unicode version alignment. Hugging Face tokenizers matches its pre-tokenizer regexes with
// Oniguruma, whose Unicode tables are newer than those of the PCRE2 we link (10.42: Unicode
// 14.0), so characters assigned since (new emoji, CJK extensions, scripts) fall in \p{L}, \p{S},
// ... there but not here. These tables list, per class, exactly those extra code points, measured
// from HF itself by tests/tokenizer/gen_unicode_delta.js; regex_translation adds them to each
// class. (No code point leaves a class between the versions; the generator checks that.)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ds {

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Extra ranges for general category class 'L', 'M', 'N', 'P' or 'S'; empty for any other.
std::span<const CodepointRange> unicode_delta_ranges(char general_category);

// The union of all classes' extra ranges, sorted, for asking whether a text needs them at all.
class UnicodeDeltaSet {
 public:
  UnicodeDeltaSet();
  // True if valid UTF-8 `text` contains a code point from any delta range. All of them are
  // ≥ U+0800, so text without 3- or 4-byte characters is answered by a byte scan.
  bool intersects(std::string_view text) const;
  bool contains(uint32_t codepoint) const;

 private:
  std::vector<CodepointRange> ranges_;
  uint32_t min_codepoint_ = 0;
};

}  // namespace ds
