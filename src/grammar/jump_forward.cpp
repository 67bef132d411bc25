#include "grammar/jump_forward.h"

#include "tokenizer/tokenizer.h"

namespace ds::grammar {

std::vector<int32_t> jump_forward_tokens(GrammarMatcher& matcher, const Tokenizer& tokenizer,
                                         size_t max_bytes) {
  std::vector<int32_t> out;
  const std::string forced = matcher.forced_bytes(max_bytes);
  if (forced.size() < 2) return out;
  Result<std::vector<int32_t>> ids = tokenizer.encode(forced, /*parse_special=*/false);
  if (!ids.ok() || ids->size() < 2) return out;
  ids->pop_back();
  for (int32_t id : *ids) {
    if (!matcher.accept_token(id)) break;  // a token the matcher's vocabulary spells otherwise: stop there
    out.push_back(id);
  }
  return out;
}

}  // namespace ds::grammar
