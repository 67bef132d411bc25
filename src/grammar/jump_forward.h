// Jump-forward decoding (SGLang's): where the grammar admits exactly one continuation (the fixed keys of a
// schema: `{"name": "` after `{`), the tokens of that text can be appended without sampling them.
//
// jump_forward_tokens encodes GrammarMatcher::forced_bytes as user text (parse_special = false) and
// drops the encoding's last token: the forced text's end may merge with what the model writes next
// (`"` + `John` is one token `"John` in the V3 vocabulary), so the model samples that token itself, under
// the mask. The tokens kept are fed to the matcher in order (it accepts them: they spell forced bytes).
// The start boundary is the last sampled token's end, as the model chose it; SGLang also retokenizes
// across it (rolling the last token back), which this does not.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar_matcher.h"

namespace ds {
class Tokenizer;
}

namespace ds::grammar {

// The forced tokens, already accepted by `matcher` (empty: nothing forced, or a single token's worth).
std::vector<int32_t> jump_forward_tokens(GrammarMatcher& matcher, const Tokenizer& tokenizer,
                                         size_t max_bytes = 256);

}  // namespace ds::grammar
