#include "tokenizer/added_vocabulary.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace ds {
namespace {

// Decodes the character at `pos` of valid UTF-8 `text`.
uint32_t codepoint_at(std::string_view text, size_t pos, size_t len) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i])); };
  switch (len) {
    case 1:
      return byte(0);
    case 2:
      return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default:
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

// Unicode White_Space, which is what Rust regex's \s (used by HF for lstrip/rstrip) matches.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Start of the run of whitespace that ends `text` (text.size() if none).
size_t trailing_space_start(std::string_view text) {
  size_t start = text.size();
  while (start > 0) {
    size_t lead = start - 1;
    while (lead > 0 && (static_cast<uint8_t>(text[lead]) & 0xC0) == 0x80) --lead;
    if (!is_white_space(codepoint_at(text, lead, start - lead))) break;
    start = lead;
  }
  return start;
}

// Length of the run of whitespace that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = utf8::char_length_at(text, pos);
    if (len == 0 || !is_white_space(codepoint_at(text, pos, len))) break;
    pos += len;
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view content, int32_t token_index) {
  int32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t child = -1;
    for (const auto& [b, idx] : nodes_[static_cast<size_t>(node)].children) {
      if (b == byte) child = idx;
    }
    if (child < 0) {
      child = static_cast<int32_t>(nodes_.size());
      nodes_[static_cast<size_t>(node)].children.emplace_back(byte, child);
      nodes_.emplace_back();
    }
    node = child;
  }
  nodes_[static_cast<size_t>(node)].token_index = token_index;
  first_byte_[static_cast<uint8_t>(content[0])] = true;
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    int32_t child = -1;
    for (const auto& [b, idx] : nodes_[static_cast<size_t>(node)].children) {
      if (b == byte) {
        child = idx;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    const int32_t token_index = nodes_[static_cast<size_t>(node)].token_index;
    if (token_index >= 0) best = {token_index, i + 1 - pos};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::build(std::vector<AddedToken> tokens, std::string_view source) {
  AddedVocabulary vocab;
  bool needs_word_char = false;
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    if (token.id < 0) {
      return Status(
          ErrorCode::tokenizer_bad_file,
          fmt::format("{}: added_tokens: token {:?} has negative id {}", source, token.content, token.id));
    }
    if (utf8::first_invalid_offset(token.content) != utf8::kValid) {
      return Status(ErrorCode::tokenizer_bad_file,
                    fmt::format("{}: added_tokens: token id {} is not valid UTF-8", source, token.id));
    }
    needs_word_char = needs_word_char || token.single_word;
    vocab.tokens_.push_back(std::move(token));
  }
  // HF puts special tokens first, then the others, each in file order; with leftmost-longest
  // matching the order only decides between identical contents, where the later entry wins.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < vocab.tokens_.size(); ++i) {
      const AddedToken& token = vocab.tokens_[i];
      if (token.special != (pass == 0)) continue;
      vocab.id_of_content_[token.content] = token.id;
      vocab.index_of_id_[token.id] = i;
      (token.normalized ? vocab.normalized_trie_ : vocab.raw_trie_)
          .insert(token.content, static_cast<int32_t>(i));
    }
  }
  if (needs_word_char) {
    // Rust regex's Unicode \w: alphabetic, marks, decimal digits, connector punctuation, joiners.
    DS_ASSIGN_OR_RETURN(
        vocab.word_char_,
        CompiledRegex::compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]", source));
  }
  return vocab;
}

bool AddedVocabulary::is_word_char_at(std::string_view text, size_t pos) const {
  const size_t len = utf8::char_length_at(text, pos);
  if (len == 0) return false;
  RegexScratch scratch;
  const Result<CompiledRegex::Match> m = word_char_->find(text.substr(pos, len), 0, scratch);
  return m.ok() && m->begin == 0;
}

bool AddedVocabulary::ends_with_word(std::string_view text) const {
  if (text.empty()) return false;
  size_t lead = text.size() - 1;
  while (lead > 0 && (static_cast<uint8_t>(text[lead]) & 0xC0) == 0x80) --lead;
  return is_word_char_at(text, lead);
}

void AddedVocabulary::split_with(const Trie& trie, std::string_view text,
                                 std::vector<TextSegment>& out) const {
  size_t start_offset = 0;  // end of the last emitted piece
  size_t pos = 0;           // where the next match may start
  while (pos < text.size()) {
    if (!trie.can_start(static_cast<uint8_t>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto [token_index, match_len] = trie.longest_at(text, pos);
    if (token_index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(token_index)];
    size_t start = pos;
    size_t stop = pos + match_len;
    pos = stop;  // matching resumes after the raw match, whatever the flags do below
    if (token.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !is_word_char_at(text, stop);
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (start > start_offset) out.push_back({text.substr(start_offset, start - start_offset), -1});
    out.push_back({text.substr(start, stop - start), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

void AddedVocabulary::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (text.empty()) return;
  if (raw_trie_.empty() && normalized_trie_.empty()) {
    out.push_back({text, -1});
    return;
  }
  std::vector<TextSegment> first_pass;
  split_with(raw_trie_, text, first_pass);
  for (const TextSegment& segment : first_pass) {
    if (segment.token_id >= 0 || normalized_trie_.empty()) {
      out.push_back(segment);
    } else {
      split_with(normalized_trie_, segment.text, out);
    }
  }
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = id_of_content_.find(std::string(content));
  if (it == id_of_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::find_by_id(int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::is_special(int32_t id) const {
  const AddedToken* token = find_by_id(id);
  return token != nullptr && token->special;
}

}  // namespace ds
