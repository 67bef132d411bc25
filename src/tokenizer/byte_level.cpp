#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace ds {
namespace {

bool maps_to_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_codepoint_.fill(-1);
  uint32_t next_extra = 256;
  for (int byte = 0; byte < 256; ++byte) {
    const uint32_t cp = maps_to_itself(byte) ? static_cast<uint32_t>(byte) : next_extra++;
    codepoint_of_byte_[byte] = cp;
    byte_of_codepoint_[cp] = static_cast<int16_t>(byte);
    std::string text;
    utf8::append_codepoint(cp, text);
    utf8_len_of_byte_[byte] = static_cast<uint8_t>(text.size());
    for (size_t i = 0; i < text.size(); ++i) utf8_of_byte_[byte * 2 + i] = text[i];
  }
}

std::string_view ByteLevelAlphabet::char_of_byte(uint8_t byte) const {
  return {utf8_of_byte_.data() + byte * 2, utf8_len_of_byte_[byte]};
}

std::optional<uint8_t> ByteLevelAlphabet::byte_of_codepoint(uint32_t codepoint) const {
  if (codepoint >= byte_of_codepoint_.size() || byte_of_codepoint_[codepoint] < 0) return std::nullopt;
  return static_cast<uint8_t>(byte_of_codepoint_[codepoint]);
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(char_of_byte(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> ByteLevelAlphabet::decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = utf8::char_length_at(text, pos);
    if (len == 0 || len > 2) return std::nullopt;  // alphabet chars are 1 or 2 UTF-8 bytes
    const auto b0 = static_cast<uint8_t>(text[pos]);
    const uint32_t cp = len == 1 ? b0 : ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3Fu);
    const std::optional<uint8_t> byte = byte_of_codepoint(cp);
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
    pos += len;
  }
  return out;
}

}  // namespace ds
