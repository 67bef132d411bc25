#include "tokenizer/engram_token_map.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ds {

namespace {

// utf8proc's malloc'd results.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::u32string code_points(std::string_view utf8) {
  std::u32string out;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(utf8.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) break;  // callers pass valid UTF-8
    out.push_back(static_cast<char32_t>(cp));
    p += n;
    left -= n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string mapped(std::string_view s, utf8proc_option_t options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out, options);
  std::unique_ptr<utf8proc_uint8_t, FreeDeleter> owned(out);
  if (n < 0) return std::string(s);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

bool is_collapsed_space(char32_t c) { return c == U' ' || c == U'\t' || c == U'\r' || c == U'\n'; }

// What the strip step removes: Python's str.isspace (the reference is Python), i.e. bidi class
// WS, B or S, or category Zs — Unicode White_Space plus U+001C..U+001F (docs/models.md "Engram").
bool is_space(char32_t c) {
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

}  // namespace

std::string engram_normalize(std::string_view utf8) {
  const std::string nfkc =
      mapped(utf8, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  const std::string nfd = mapped(nfkc, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  // Strip accents = drop nonspacing marks (Mn), as the HF StripAccents normaliser; then lowercase
  // per character (after NFD no character with a multi-character lowercase is left).
  std::string lowered;
  for (char32_t c : code_points(nfd)) {
    if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_MN) continue;
    append_utf8(lowered, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  // Collapse [ \t\r\n]+ to one space, then strip whitespace at both ends.
  std::u32string cps = code_points(lowered), collapsed;
  for (char32_t c : cps) {
    if (is_collapsed_space(c)) {
      if (collapsed.empty() || collapsed.back() != U' ') collapsed.push_back(U' ');
    } else {
      collapsed.push_back(c);
    }
  }
  size_t b = 0, e = collapsed.size();
  while (b < e && is_space(collapsed[b])) ++b;
  while (e > b && is_space(collapsed[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) append_utf8(out, collapsed[i]);
  return out;
}

Result<EngramTokenMap> build_engram_token_map(const Tokenizer& tok, int32_t vocab_size) {
  EngramTokenMap map;
  map.compressed.resize(static_cast<size_t>(vocab_size));
  std::unordered_map<std::string, int32_t> ids;
  const ByteLevelAlphabet alphabet;
  for (int32_t id = 0; id < vocab_size; ++id) {
    Result<std::string_view> known = tok.token_bytes(id);
    std::string key;
    if (!known.ok()) {
      key = "";  // not in the vocabulary: decodes to ""
    } else if (const std::string_view bytes = *known; utf8::first_invalid_offset(bytes) != utf8::kValid) {
      key = alphabet.encode(bytes);  // undecodable bytes: the raw (byte-level) spelling
    } else {
      key = engram_normalize(bytes);
      if (key.empty()) {  // pure whitespace -> " "; anything else (e.g. only marks) -> its own text
        const std::u32string cps = code_points(bytes);
        const bool all_space = !cps.empty() && std::all_of(cps.begin(), cps.end(), is_space);
        key = all_space ? std::string(" ") : std::string(bytes);
      }
    }
    auto [it, fresh] = ids.emplace(std::move(key), static_cast<int32_t>(ids.size()));
    map.compressed[static_cast<size_t>(id)] = it->second;
  }
  map.n_compressed = static_cast<int32_t>(ids.size());
  return map;
}

}  // namespace ds
