// V4.1 Engram's compressed token map (model-spec §5.7), built at load from the checkpoint's own
// tokenizer: each id's decoded text normalised by NFKC → NFD → strip accents (nonspacing marks) →
// lowercase → collapse [ \t\r\n]+ to one space → strip, with utf8proc (no hand-written tables).
// Keys: a text normalising to pure whitespace is " "; one normalising to "" keeps its own text; a
// token whose bytes are not valid UTF-8 uses its raw vocabulary spelling (the byte-level text). Compressed
// ids are assigned in order of first appearance over ids 0, 1, ...; the count must equal
// engram_compressed_vocab_size (99092 for V4.1-Flash).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace ds {

// The normalisation chain above on valid UTF-8 (before the whitespace/empty rules).
std::string engram_normalize(std::string_view utf8);

struct EngramTokenMap {
  std::vector<int32_t> compressed;  // [vocab_size]: token id -> compressed id
  int32_t n_compressed = 0;
};

// Over ids [0, vocab_size). Ids the tokenizer lacks (vocab_size pads past the real vocabulary, as
// in V3/V4/V4.1's 129280) take the key "", what Hugging Face's decode gives for them (a decision:
// docs/models.md "Engram").
Result<EngramTokenMap> build_engram_token_map(const Tokenizer& tok, int32_t vocab_size);

}  // namespace ds
