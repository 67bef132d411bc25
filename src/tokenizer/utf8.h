// UTF-8 validation and repair, with exactly the rules Rust's `str` uses (Hugging Face tokenizers
// is written in Rust, so its notion of "valid" and its U+FFFD replacement are what we match):
// no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::utf8 {

inline constexpr size_t kValid = static_cast<size_t>(-1);
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed character starting at `text[pos]`, or 0 if the bytes there do not
// start one (invalid lead byte, bad continuation, overlong, surrogate, or truncated).
size_t char_length_at(std::string_view text, size_t pos);

// Byte offset of the first byte that is not part of a well-formed character, or kValid.
size_t first_invalid_offset(std::string_view text);

// Length of the longest suffix of `bytes` that is a proper prefix of some well-formed character
// (0..3): bytes a streaming decoder must hold back because a later token may complete them.
size_t incomplete_tail_length(std::string_view bytes);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with one U+FFFD (the
// Unicode "substitution of maximal subparts" practice, which Rust's from_utf8_lossy follows).
void append_lossy(std::string_view bytes, std::string& out);
std::string to_valid_lossy(std::string_view bytes);

// Appends the UTF-8 encoding of `codepoint` (must be a scalar value, i.e. not a surrogate).
void append_codepoint(uint32_t codepoint, std::string& out);

}  // namespace ds::utf8
