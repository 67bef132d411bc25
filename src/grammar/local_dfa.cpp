#include "grammar/local_dfa.h"

#include <algorithm>

namespace ds::grammar {

size_t LocalDfa::KeyHash::operator()(const std::vector<uint64_t>& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ k.size();
  for (uint64_t v : k) {
    v *= 0xbf58476d1ce4e5b9ULL;
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

uint32_t LocalDfa::intern(const EarleyParser& parser, std::span<const uint32_t> set_ids) {
  const ParserTables& tables = parser.tables();
  const auto cur = static_cast<uint32_t>(parser.n_sets() - 1);
  key_.clear();
  for (const EarleyParser::Item& it : parser.last_set()) {
    // An end item was completed when its set was closed; it cannot act on any later byte.
    if (tables.kinds[it.kind].next == ItemKind::Next::end) continue;
    uint64_t ref;
    if (it.origin == EarleyParser::kExternal)
      ref = kRefExternal;
    else if (it.origin == cur)
      ref = kRefThisSet;
    else if (set_ids[it.origin] == kNoState)
      return kNoState;  // an origin set that is not a state itself: this one cannot be named either
    else
      ref = set_ids[it.origin];
    key_.push_back(uint64_t{it.kind} << 32 | ref);
  }
  std::sort(key_.begin(), key_.end());
  key_.erase(std::unique(key_.begin(), key_.end()), key_.end());
  auto found = ids_.find(key_);
  if (found != ids_.end()) return found->second;
  if (full()) return kNoState;
  const auto id = static_cast<uint32_t>(n_states());
  next_.resize(next_.size() + n_classes_, kUnknown);
  ids_.emplace(key_, id);
  keys_.push_back(key_);
  return id;
}

void LocalDfa::clear() {
  ids_.clear();
  next_.clear();
  keys_.clear();
}

}  // namespace ds::grammar
