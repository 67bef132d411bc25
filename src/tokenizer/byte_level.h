// GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable Unicode character so a
// BPE vocabulary can be stored as text. Printable Latin-1 bytes map to themselves; the other 68
// bytes map to U+0100.. in byte order (space 0x20 -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ds {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  uint32_t codepoint_of_byte(uint8_t byte) const { return codepoint_of_byte_[byte]; }
  // UTF-8 text of the character standing for `byte`.
  std::string_view char_of_byte(uint8_t byte) const;
  // The byte a character stands for, or nullopt if `codepoint` is not in the alphabet.
  std::optional<uint8_t> byte_of_codepoint(uint32_t codepoint) const;

  // Raw bytes -> byte-level text (how vocab entries are spelled).
  std::string encode(std::string_view bytes) const;
  // Byte-level text -> raw bytes; nullopt if some character is not in the alphabet or the text
  // is not valid UTF-8 (Hugging Face's ByteLevel decoder then keeps the token's text as is).
  std::optional<std::string> decode(std::string_view text) const;

 private:
  std::array<uint32_t, 256> codepoint_of_byte_{};
  std::array<char, 256 * 2> utf8_of_byte_{};  // every alphabet char is 1 or 2 UTF-8 bytes
  std::array<uint8_t, 256> utf8_len_of_byte_{};
  std::array<int16_t, 324> byte_of_codepoint_{};  // alphabet codepoints are all < 0x144; -1 = none
};

}  // namespace ds
