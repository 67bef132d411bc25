// The pre-tokenizer of tokenizer.json: a sequence of Split(regex, behavior "Isolated") steps,
// each cutting every current piece into regex matches and the gaps between them. The regexes run
// on PCRE2 with UTF + UCP (Unicode \s, \p{..}) and JIT, standing in for HF's Oniguruma.
// Each regex is compiled twice: with the Unicode-version delta added to its \p{..} classes
// (exact everywhere, slower) and without (exact on text that has no delta code point, which is
// nearly all text). split() picks per call after one scan of the text.
// (The ByteLevel step that follows, with use_regex false, only respells bytes; the BPE model works
// on raw bytes directly, so it needs no code here.)
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/compiled_regex.h"
#include "tokenizer/unicode_delta.h"

namespace ds {

class PreTokenizer {
 public:
  // `patterns` are applied in order; `source` names the file in error messages.
  static Result<PreTokenizer> build(const std::vector<std::string>& patterns, std::string_view source);

  // Appends the pieces of `text` (valid UTF-8) to `pieces`, in order, covering all of it; no piece
  // is empty. Fails only if PCRE2 reports a matching error (e.g. a resource limit).
  // `scratch` is per-thread matching state; `work` is a reusable buffer.
  Status split(std::string_view text, RegexScratch& scratch, std::vector<std::string_view>& pieces,
               std::vector<std::string_view>& work) const;

 private:
  PreTokenizer() = default;
  std::vector<std::unique_ptr<CompiledRegex>> regexes_;        // \p{..} without the delta
  std::vector<std::unique_ptr<CompiledRegex>> delta_regexes_;  // \p{..} with the delta
  UnicodeDeltaSet delta_;
};

}  // namespace ds
