#include "grammar/compiled_grammar.h"

namespace ds::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab,
                                 size_t max_cached_states, size_t max_dfa_states)
    : grammar_(std::move(grammar)),
      tables_(ParserTables::build(grammar_)),
      vocab_(std::move(vocab)),
      hash_(grammar_.hash()),
      max_cached_states_(max_cached_states),
      dfa_(tables_, max_dfa_states) {}

size_t CompiledGrammar::KeyHash::operator()(const std::vector<uint64_t>& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ k.size();
  for (uint64_t v : k) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

std::shared_ptr<const StateMask> CompiledGrammar::find_state(const std::vector<uint64_t>& key) const {
  std::lock_guard lock(mu_);
  auto it = states_.find(key);
  return it == states_.end() ? nullptr : it->second;
}

void CompiledGrammar::store_state(const std::vector<uint64_t>& key,
                                  std::shared_ptr<const StateMask> mask) const {
  std::lock_guard lock(mu_);
  if (states_.size() < max_cached_states_) states_.emplace(key, std::move(mask));
}

size_t CompiledGrammar::n_cached_states() const {
  std::lock_guard lock(mu_);
  return states_.size();
}

}  // namespace ds::grammar
