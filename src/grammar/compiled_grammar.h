// A grammar ready for decoding against one vocabulary: its parser tables, the shared vocabulary trie and
// the per-state token cache. Immutable except for the cache (guarded by a mutex), so one CompiledGrammar
// serves every request that uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/local_dfa.h"
#include "grammar/parser_tables.h"
#include "grammar/repeat_run.h"
#include "grammar/token_trie.h"

namespace ds::grammar {

// The context-independent part of one parser state's mask (xgrammar's adaptive token cache, computed
// lazily): `accepted` holds tokens accepted whatever the parse below the state; `escape_nodes` are trie
// nodes where the walk completed an item from an earlier set, whose subtrees are checked per request.
struct StateMask {
  std::vector<uint32_t> accepted;      // bitmask over the vocabulary
  std::vector<uint32_t> escape_nodes;  // trie nodes, disjoint subtrees, preorder
};

class CompiledGrammar {
 public:
  static constexpr size_t kDefaultMaxDfaStates = 8192;  // 4 bytes per byte class each
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> vocab, size_t max_cached_states,
                  size_t max_dfa_states = kDefaultMaxDfaStates);

  const Grammar& grammar() const { return grammar_; }
  const ParserTables& tables() const { return tables_; }
  const TokenTrie& vocab() const { return *vocab_; }
  uint64_t hash() const { return hash_; }

  // The cached StateMask for a state key (EarleyParser::state_key), or nullptr.
  std::shared_ptr<const StateMask> find_state(const std::vector<uint64_t>& key) const;
  // Stores it (kept while under max_cached_states; past that, masks are recomputed, never wrong).
  void store_state(const std::vector<uint64_t>& key, std::shared_ptr<const StateMask> mask) const;
  size_t n_cached_states() const;

  // The repeat run and position whose state has this key (repeat_run.h), or nullptr.
  struct RunPosition {
    uint32_t run;
    uint32_t k;
  };
  const RunPosition* run_position(const std::vector<uint64_t>& key) const;
  // A run class's inside walk and a run's exit walk (repeat_run.h); nullptr until stored.
  std::shared_ptr<const RunMask> find_run_inside(uint32_t run_class) const;
  void store_run_inside(uint32_t run_class, std::shared_ptr<const RunMask> mask) const;
  std::shared_ptr<const RunMask> find_run_exits(uint32_t run) const;
  void store_run_exits(uint32_t run, std::shared_ptr<const RunMask> mask) const;
  // Counters (tests, bench): inside walks and exit walks done, positions derived from them.
  size_t n_run_walks() const;
  size_t n_run_exit_walks() const;
  size_t n_run_positions_derived() const;
  void count_run_position_derived() const;

  // Runs f(LocalDfa&) with the grammar's local-state DFA locked (first-visit walks, state_mask_walk.h).
  // A DFA past its state bound is cleared first.
  template <class F>
  auto with_local_dfa(F&& f) const {
    std::lock_guard lock(dfa_mu_);
    if (dfa_.full()) dfa_.clear();
    return f(dfa_);
  }

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint64_t>& k) const;
  };
  Grammar grammar_;
  ParserTables tables_;
  std::shared_ptr<const TokenTrie> vocab_;
  uint64_t hash_;
  size_t max_cached_states_;
  mutable std::mutex mu_;  // guards states_
  mutable std::unordered_map<std::vector<uint64_t>, std::shared_ptr<const StateMask>, KeyHash> states_;
  std::unordered_map<std::vector<uint64_t>, RunPosition, KeyHash> run_positions_;  // immutable
  mutable std::vector<std::shared_ptr<const RunMask>> run_inside_;  // per run class, guarded by mu_
  mutable std::vector<std::shared_ptr<const RunMask>> run_exits_;   // per run, guarded by mu_
  mutable size_t n_run_walks_ = 0;                                  // guarded by mu_
  mutable size_t n_run_exit_walks_ = 0;                             // guarded by mu_
  mutable size_t n_run_derived_ = 0;                                // guarded by mu_
  mutable std::mutex dfa_mu_;                                       // guards dfa_
  mutable LocalDfa dfa_;
};

}  // namespace ds::grammar
