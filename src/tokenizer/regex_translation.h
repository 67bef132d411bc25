// Rewrites a Hugging Face (Oniguruma) pre-tokenizer regex so PCRE2 matches the same characters:
//  - \s, \S: Oniguruma's Unicode \s is exactly White_Space; PCRE2's UCP \s also takes U+180E
//    (and differs in other details), so both become explicit White_Space classes.
//  - \p{L} \p{M} \p{N} \p{P} \p{S} (and \pL ...): the class plus the code points assigned since
//    PCRE2's Unicode version (unicode_delta.h).
// Everything else is copied unchanged. Constructs this cannot translate faithfully (\S or \P{..}
// inside a character class) are an error rather than a silent difference.
#pragma once

#include <string>

#include "base/status.h"

namespace ds {

// `source` names the file in error messages (tokenizer_bad_file). With add_unicode_delta false
// the \p{..} classes are left as they are: the faster form, exact on text that contains no
// code point from unicode_delta_ranges() (see PreTokenizer).
Result<std::string> translate_hf_regex(const std::string& pattern, const std::string& source,
                                       bool add_unicode_delta = true);

}  // namespace ds
