// Test fixture: a small byte-level BPE tokenizer.json written in the same format as DeepSeek's
// (identity normalizer, the three DeepSeek Split regexes, ByteLevel, BPE, added tokens), so unit
// tests can check hand-computed ids without the real 128k vocabulary.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace ds::testing {

// Ids: 0..2 specials, 3..258 the 256 byte tokens (byte b -> 3 + b), then one id per merge in
// order. Added: 0 "<s>", 1 "</s>", 2 "<pad>" (special), 300 "<|user|>" (non-special,
// normalized), 301 "<think>" (non-special).
inline const std::vector<std::pair<std::string, std::string>>& tiny_merges() {
  static const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},     // 259 "he"
      {"Ġ", "t"},     // 260 "Ġt"
      {"Ġt", "he"},   // 261 "Ġthe"
      {"l", "l"},     // 262 "ll"
      {"he", "ll"},   // 263 "hell"
      {"hell", "o"},  // 264 "hello"
      {"a", "a"},     // 265 "aa"
      {"aa", "aa"},   // 266 "aaaa"
      {"1", "2"},     // 267 "12"
      {"Ġ", "Ġ"},     // 268 "ĠĠ"
  };
  return merges;
}

inline constexpr int kTinyFirstMergeId = 259;
inline int tiny_byte_id(unsigned char byte) { return 3 + byte; }

// `merges_as_pairs` picks the newer [["a","b"], ...] form instead of "a b" strings.
inline std::string tiny_tokenizer_json(bool merges_as_pairs = false) {
  using nlohmann::json;
  const ByteLevelAlphabet alphabet;
  json vocab = json::object();
  vocab["<s>"] = 0;
  vocab["</s>"] = 1;
  vocab["<pad>"] = 2;
  for (int b = 0; b < 256; ++b)
    vocab[std::string(alphabet.char_of_byte(static_cast<uint8_t>(b)))] =
        tiny_byte_id(static_cast<unsigned char>(b));
  json merges = json::array();
  int next_id = kTinyFirstMergeId;
  for (const auto& [left, right] : tiny_merges()) {
    vocab[left + right] = next_id++;
    merges.push_back(merges_as_pairs ? json::array({left, right}) : json(left + " " + right));
  }
  const auto added = [](int id, const char* content, bool special, bool normalized) {
    return json{{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", normalized}, {"special", special}};
  };
  json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({added(0, "<s>", true, false), added(1, "</s>", true, false),
                                    added(2, "<pad>", true, false), added(300, "<|user|>", false, true),
                                    added(301, "<think>", false, true)})},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array()}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({
             {{"type", "Split"},
              {"pattern", {{"Regex", "\\p{N}{1,3}"}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             {{"type", "Split"},
              {"pattern", {{"Regex", "[一-龥぀-ゟ゠-ヿ]+"}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             {{"type", "Split"},
              {"pattern",
               {{"Regex",
                 "[!\"#$%&'()*+,\\-./"
                 ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
                 "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}}},
              {"behavior", "Isolated"},
              {"invert", false}},
             {{"type", "ByteLevel"},
              {"add_prefix_space", false},
              {"trim_offsets", true},
              {"use_regex", false}},
         })}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return root.dump();
}

inline std::string tiny_tokenizer_config_json() {
  return R"({"add_bos_token": true, "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>"})";
}

}  // namespace ds::testing
