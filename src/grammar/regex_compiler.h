// Regex (the PCRE subset people write in schemas and guided_regex) -> the byte CFG. The whole output must
// match (as if anchored at both ends). Supported: literals (UTF-8), '.', classes [...] / [^...] with
// ranges and \d \w \s \D \W \S (ASCII meanings, like Python's re.ASCII), escapes \n \r \t \f \v \0 \xHH
// \uHHHH \u{H..} and escaped punctuation, quantifiers * + ? {m} {m,} {m,n} (lazy '?' suffix accepted:
// same language), groups ( ) (?: ) (?<name> ) (?P<name> ), alternation, ^ at the start and $ at the end
// of a top-level alternative. Anything else (backreferences, lookaround, \b, \p{..}, possessive
// quantifiers, inline flags) is grammar_unsupported naming the construct and its offset.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/grammar_builder.h"

namespace ds::grammar {

// Adds the regex's rules to `builder` and returns the element matching it. json_string_chars: every
// character class leaves out '"', '\\' and control characters, so the match can sit inside a JSON string
// unescaped (JSON Schema "pattern").
Result<Element> add_regex(GrammarBuilder& builder, std::string_view pattern, const GrammarLimits& limits,
                          bool json_string_chars = false);

// A grammar whose language is exactly the regex's.
Result<Grammar> compile_regex(std::string_view pattern, const GrammarLimits& limits = {});

}  // namespace ds::grammar
