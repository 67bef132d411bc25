// Unicode version alignment. Hugging Face tokenizers matches its pre-tokenizer regexes with
// Oniguruma, whose Unicode tables are newer than those of the PCRE2 we link (10.42: Unicode
// 14.0), so characters assigned since (new emoji, CJK extensions, scripts) fall in \p{L}, \p{S},
// ... there but not here. These tables list, per class, exactly those extra code points, measured
// from HF itself by tests/tokenizer/gen_unicode_delta.js; regex_translation adds them to each
// class. (No code point leaves a class between the versions; the generator checks that.)
#pragma once

#include <cstdint>
#include <span>

namespace ds {

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Extra ranges for general category class 'L', 'M', 'N', 'P' or 'S'; empty for any other.
std::span<const CodepointRange> unicode_delta_ranges(char general_category);

}  // namespace ds
