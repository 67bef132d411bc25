#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace ds::grammar {

TokenTrie TokenTrie::build(const std::vector<std::string>& token_bytes, int32_t eos_id) {
  TokenTrie t;
  t.token_bytes_ = token_bytes;
  t.eos_id_ = eos_id;
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id)
    if (!token_bytes[id].empty() && static_cast<int32_t>(id) != eos_id)
      order.push_back(static_cast<int32_t>(id));
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  // Sorted strings: a token's node is always the newest node (a prefix sorts before its extensions),
  // so token ids are appended in node order. `path` holds the open nodes, one per depth.
  std::vector<uint32_t> path;
  const std::string* prev = nullptr;
  t.token_begin_.push_back(0);
  for (int32_t id : order) {
    const std::string& s = token_bytes[id];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      t.end_[path.back()] = static_cast<uint32_t>(t.byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      const auto node = static_cast<uint32_t>(t.byte_.size());
      t.byte_.push_back(static_cast<uint8_t>(s[d]));
      t.depth_.push_back(static_cast<uint16_t>(d + 1));
      t.max_depth_ = std::max(t.max_depth_, static_cast<uint32_t>(d + 1));
      t.end_.push_back(0);
      t.parent_.push_back(path.empty() ? kRoot : path.back());
      t.token_begin_.push_back(static_cast<uint32_t>(t.token_ids_.size()));
      path.push_back(node);
    }
    t.token_ids_.push_back(id);
    t.token_begin_.back() = static_cast<uint32_t>(t.token_ids_.size());
    prev = &s;
  }
  while (!path.empty()) {
    t.end_[path.back()] = static_cast<uint32_t>(t.byte_.size());
    path.pop_back();
  }
  return t;
}

Result<TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer,
                                            const std::vector<std::string>& markers) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    Result<std::string_view> b = tokenizer.token_bytes(id);
    if (b.ok()) bytes[static_cast<size_t>(id)] = std::string(*b);
  }
  for (const std::string& m : markers) {
    const std::optional<int32_t> id = tokenizer.token_to_id(m);
    if (!id) return Status{ErrorCode::grammar_bad_input, "the tokenizer has no token '" + m + "'"};
    bytes[static_cast<size_t>(*id)] = m;
  }
  return build(bytes, tokenizer.eos_id());
}

}  // namespace ds::grammar
