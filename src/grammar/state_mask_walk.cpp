#include "grammar/state_mask_walk.h"

#include <vector>

#include "grammar/token_bitmask.h"

namespace ds::grammar {

void walk_state_mask_plain(const TokenTrie& trie, EarleyParser& local, StateMask& out) {
  out.accepted.assign(bitmask_words(trie.vocab_size()), 0);
  out.escape_nodes.clear();
  for (uint32_t i = 0; i < trie.n_nodes();) {
    local.pop_to(trie.depth(i));  // the sets of i's ancestors, the local start set first
    if (!local.push_byte(trie.byte(i))) {
      i = trie.subtree_end(i);
      continue;
    }
    if (local.escaped()) {
      out.escape_nodes.push_back(i);
      i = trie.subtree_end(i);
      continue;
    }
    for (int32_t id : trie.tokens_at(i)) bitmask_set(out.accepted, id);
    ++i;
  }
  local.pop_to(1);
}

namespace {

// The Earley parser kept on the trie path on demand: it holds the sets of the path down to some node,
// and is brought to another node's path by popping to the common ancestor and pushing the rest.
class PathParser {
 public:
  PathParser(const TokenTrie& trie, EarleyParser& parser) : trie_(trie), parser_(parser) {
    parser_.pop_to(1);
  }

  // Makes the parser hold the sets of the root .. `node` (node = TokenTrie::kRoot: the start set only).
  // Every byte on that path was accepted before, without escaping.
  void sync_to(uint32_t node) {
    ancestors_.clear();
    for (uint32_t p = node; p != TokenTrie::kRoot; p = trie_.parent(p)) ancestors_.push_back(p);
    const size_t depth = ancestors_.size();  // ancestors_[depth - d] is the node at depth d
    size_t keep = std::min(synced_.size(), depth);
    while (keep > 0 && synced_[keep - 1] != ancestors_[depth - keep]) --keep;
    parser_.pop_to(keep + 1);
    synced_.resize(keep);
    for (size_t d = keep + 1; d <= depth; ++d) {
      const uint32_t n = ancestors_[depth - d];
      parser_.push_byte(trie_.byte(n));
      synced_.push_back(n);
    }
  }
  // After a push_byte of `node`'s byte from its parent's sets.
  void pushed(uint32_t node) { synced_.push_back(node); }
  // After a rejected push (nothing changed) or to drop the last set of an escaped push.
  void drop_last(size_t depth_before) {
    parser_.pop_to(depth_before + 1);
    synced_.resize(depth_before);
  }
  EarleyParser& parser() { return parser_; }

 private:
  const TokenTrie& trie_;
  EarleyParser& parser_;
  std::vector<uint32_t> synced_;  // synced_[d - 1]: the node at depth d whose set the parser holds
  std::vector<uint32_t> ancestors_;
};

// One Earley push for node i from its parent's state, recorded in the DFA. Returns kDead, kEscaped, the
// new state, or kUnknown when the new state could not be interned (the walk goes on with the parser).
int32_t transition_by_parser(const TokenTrie& trie, PathParser& path, LocalDfa& dfa,
                             std::span<const uint32_t> state, uint32_t i) {
  const uint32_t depth = trie.depth(i);
  const uint32_t from = state[depth - 1];
  path.sync_to(trie.parent(i));
  EarleyParser& p = path.parser();
  int32_t result;
  if (!p.push_byte(trie.byte(i))) {
    result = LocalDfa::kDead;
  } else if (p.escaped()) {
    result = LocalDfa::kEscaped;
    path.drop_last(depth - 1);
  } else {
    path.pushed(i);
    const uint32_t to = dfa.intern(p, state.first(depth));
    if (to == LocalDfa::kNoState) return LocalDfa::kUnknown;
    result = static_cast<int32_t>(to);
  }
  if (from != LocalDfa::kNoState) dfa.set_next(from, trie.byte(i), result);
  return result;
}

}  // namespace

void walk_state_mask(const TokenTrie& trie, EarleyParser& local, LocalDfa& dfa, StateMask& out) {
  out.accepted.assign(bitmask_words(trie.vocab_size()), 0);
  out.escape_nodes.clear();
  std::span<uint32_t> accepted(out.accepted);
  PathParser path(trie, local);
  // state[d]: the DFA state of the set after the path's first d bytes (kNoState: not interned).
  std::vector<uint32_t> state(trie.max_depth() + 1, LocalDfa::kNoState);
  state[0] = dfa.intern(local, {});
  uint64_t hits = 0, misses = 0;
  const uint32_t n_nodes = static_cast<uint32_t>(trie.n_nodes());
  for (uint32_t i = 0; i < n_nodes;) {
    const uint32_t depth = trie.depth(i);
    const uint32_t from = state[depth - 1];
    const uint8_t byte = trie.byte(i);
    int32_t result = from == LocalDfa::kNoState ? LocalDfa::kUnknown : dfa.next(from, byte);
    if (result >= 0) {  // the common case: a known transition to a state
      ++hits;
      state[depth] = static_cast<uint32_t>(result);
      for (int32_t id : trie.tokens_at(i)) bitmask_set(accepted, id);
      ++i;
      continue;
    }
    if (result != LocalDfa::kUnknown) {
      ++hits;
    } else {
      ++misses;
      result = transition_by_parser(trie, path, dfa, state, i);
    }
    if (result == LocalDfa::kDead) {
      i = trie.subtree_end(i);
      continue;
    }
    if (result == LocalDfa::kEscaped) {
      out.escape_nodes.push_back(i);
      i = trie.subtree_end(i);
      continue;
    }
    state[depth] = result == LocalDfa::kUnknown ? LocalDfa::kNoState : static_cast<uint32_t>(result);
    for (int32_t id : trie.tokens_at(i)) bitmask_set(accepted, id);
    ++i;
  }
  dfa.n_hits += hits;
  dfa.n_misses += misses;
  local.pop_to(1);
}

size_t precompute_loop_states(const CompiledGrammar& grammar, size_t max_states) {
  const ParserTables& tables = grammar.tables();
  EarleyParser local(tables);
  std::vector<uint64_t> key;
  size_t stored = 0;
  for (uint32_t kind = 0; kind < tables.kinds.size() && stored < max_states; ++kind) {
    const ItemKind& k = tables.kinds[kind];
    if (!k.star || k.next == ItemKind::Next::end) continue;
    local.reset_local_items(std::span<const uint32_t>(&kind, 1));
    local.state_key(key);
    if (grammar.find_state(key) != nullptr) continue;
    auto mask = std::make_shared<StateMask>();
    grammar.with_local_dfa([&](LocalDfa& dfa) { walk_state_mask(grammar.vocab(), local, dfa, *mask); });
    grammar.store_state(key, std::move(mask));
    ++stored;
  }
  return stored;
}

}  // namespace ds::grammar
