// Codepoint ranges as UTF-8 byte-sequence alternatives (the utf8-ranges construction of Rust's regex):
// [lo, hi] splits into pieces whose every byte position is one byte range, e.g. U+0080..U+07FF ->
// [C2-DF][80-BF]. Surrogates (U+D800..U+DFFF) are never produced.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace ds::grammar {

struct CodepointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

using ByteSequence = std::vector<std::pair<uint8_t, uint8_t>>;  // one inclusive byte range per position

std::vector<ByteSequence> utf8_sequences(CodepointRange range);

// Sorted, merged ranges; the complement within [0, 0x10FFFF] minus surrogates.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges);
std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges);

}  // namespace ds::grammar
