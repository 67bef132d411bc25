#include "grammar/compiled_grammar.h"

#include "grammar/earley_parser.h"

namespace ds::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab,
                                 size_t max_cached_states, size_t max_dfa_states)
    : grammar_(std::move(grammar)),
      tables_(ParserTables::build(grammar_)),
      vocab_(std::move(vocab)),
      hash_(grammar_.hash()),
      max_cached_states_(max_cached_states),
      dfa_(tables_, max_dfa_states) {
  // The state key of each position of each repeat run: the state any parse is in after k copies.
  EarleyParser local(tables_);
  std::vector<uint64_t> key;
  for (uint32_t r = 0; r < tables_.runs.size(); ++r) {
    for (uint32_t k = 0; k <= tables_.runs[r].n_copies; ++k) {
      const uint32_t kind = tables_.runs[r].first_kind + k;
      local.reset_local_items(std::span<const uint32_t>(&kind, 1));
      local.state_key(key);
      run_positions_.try_emplace(key, RunPosition{r, k});
    }
  }
  run_inside_.resize(tables_.n_run_classes);
  run_exits_.resize(tables_.runs.size());
}

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

namespace ds::grammar {

const CompiledGrammar::RunPosition* CompiledGrammar::run_position(const std::vector<uint64_t>& key) const {
  auto it = run_positions_.find(key);
  return it == run_positions_.end() ? nullptr : &it->second;
}

std::shared_ptr<const RunMask> CompiledGrammar::find_run_inside(uint32_t run_class) const {
  std::lock_guard lock(mu_);
  return run_inside_[run_class];
}

void CompiledGrammar::store_run_inside(uint32_t run_class, std::shared_ptr<const RunMask> mask) const {
  std::lock_guard lock(mu_);
  ++n_run_walks_;
  if (run_inside_[run_class] == nullptr) run_inside_[run_class] = std::move(mask);
}

std::shared_ptr<const RunMask> CompiledGrammar::find_run_exits(uint32_t run) const {
  std::lock_guard lock(mu_);
  return run_exits_[run];
}

void CompiledGrammar::store_run_exits(uint32_t run, std::shared_ptr<const RunMask> mask) const {
  std::lock_guard lock(mu_);
  ++n_run_exit_walks_;
  if (run_exits_[run] == nullptr) run_exits_[run] = std::move(mask);
}

size_t CompiledGrammar::n_run_exit_walks() const {
  std::lock_guard lock(mu_);
  return n_run_exit_walks_;
}

size_t CompiledGrammar::n_run_walks() const {
  std::lock_guard lock(mu_);
  return n_run_walks_;
}

size_t CompiledGrammar::n_run_positions_derived() const {
  std::lock_guard lock(mu_);
  return n_run_derived_;
}

void CompiledGrammar::count_run_position_derived() const {
  std::lock_guard lock(mu_);
  ++n_run_derived_;
}

}  // namespace ds::grammar
