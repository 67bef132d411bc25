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

// Where a shadow state stands in its run, from its DFA content (repeat_run.h).
enum class RunPlace : int8_t { unknown, boundary, inside, left, ambiguous };

RunPlace classify_run_state(const ParserTables& tables, const RepeatRun& run, std::span<const uint64_t> key) {
  bool star = false, element = false, element_earlier = false, other = false;
  const std::vector<uint8_t>* rules =
      run.element_rules == RepeatRun::kNoRules ? nullptr : &tables.run_element_rules[run.element_rules];
  for (uint64_t v : key) {
    const auto kind = static_cast<uint32_t>(v >> 32);
    const auto ref = static_cast<uint32_t>(v);
    if (kind == run.shadow_kind || kind == run.shadow_kind + 1) {
      star = true;
    } else if (kind < tables.n_grammar_kinds && rules != nullptr && (*rules)[tables.kinds[kind].rule]) {
      element = true;
      if (ref != LocalDfa::kRefThisSet) element_earlier = true;
    } else {
      other = true;
    }
  }
  if (star) return other || element_earlier ? RunPlace::ambiguous : RunPlace::boundary;
  if (element) return other ? RunPlace::ambiguous : RunPlace::inside;
  return RunPlace::left;
}

}  // namespace

bool walk_run_inside(const TokenTrie& trie, const RepeatRun& run, EarleyParser& local, LocalDfa& dfa,
                     RunMask& out) {
  const ParserTables& tables = local.tables();
  out.tokens.clear();
  out.escapes.clear();
  out.exits.clear();
  local.reset_local_items(std::span<const uint32_t>(&run.shadow_kind, 1));
  std::vector<RunPlace> places;
  auto place = [&](uint32_t s) {
    if (s >= places.size()) places.resize(dfa.n_states(), RunPlace::unknown);
    if (places[s] == RunPlace::unknown) places[s] = classify_run_state(tables, run, dfa.key(s));
    return places[s];
  };
  PathParser path(trie, local);
  std::vector<uint32_t> state(trie.max_depth() + 1, LocalDfa::kNoState);
  std::vector<uint16_t> code(trie.max_depth() + 1, 0);  // run code of the path's first d bytes
  state[0] = dfa.intern(local, {});
  if (state[0] == LocalDfa::kNoState || place(state[0]) != RunPlace::boundary) {
    local.pop_to(1);
    return false;
  }
  constexpr uint16_t kMaxCode = 0xfff0;
  uint64_t hits = 0, misses = 0;
  const uint32_t n_nodes = static_cast<uint32_t>(trie.n_nodes());
  for (uint32_t i = 0; i < n_nodes;) {
    const uint32_t depth = trie.depth(i);
    int32_t result = dfa.next(state[depth - 1], trie.byte(i));
    if (result == LocalDfa::kUnknown) {
      ++misses;
      result = transition_by_parser(trie, path, dfa, state, i);
    } else {
      ++hits;
    }
    if (result == LocalDfa::kDead) {
      i = trie.subtree_end(i);
      continue;
    }
    const uint16_t above = code[depth - 1];
    uint16_t c = above;
    bool escape = result < 0;  // escaped, or a state the DFA could not name
    if (!escape) {
      switch (place(static_cast<uint32_t>(result))) {
        case RunPlace::boundary:  // one more whole copy
          escape = above >= kMaxCode;
          c = static_cast<uint16_t>(((above >> 2) + 1) << 2);
          break;
        case RunPlace::inside:
          c = above | RunMask::kPartial;
          break;
        case RunPlace::left:  // T scanned at a copy boundary: the rest is per run (walk_run_exits)
          if (above & RunMask::kPartial) {
            escape = true;
            break;
          }
          out.exits.push_back({i, static_cast<uint16_t>(above | RunMask::kExited)});
          i = trie.subtree_end(i);
          continue;
        default:
          escape = true;
      }
    }
    if (escape) {
      out.escapes.push_back({i, above});
      i = trie.subtree_end(i);
      continue;
    }
    state[depth] = static_cast<uint32_t>(result);
    code[depth] = c;
    for (int32_t id : trie.tokens_at(i)) out.tokens.push_back({id, c});
    ++i;
  }
  dfa.n_hits += hits;
  dfa.n_misses += misses;
  local.pop_to(1);
  return true;
}

bool walk_run_exits(const TokenTrie& trie, const RepeatRun& run, const RunMask& inside, EarleyParser& local,
                    LocalDfa& dfa, RunMask& out) {
  out.tokens.clear();
  out.escapes.clear();
  out.exits.clear();
  local.reset_local_items(std::span<const uint32_t>(&run.shadow_kind, 1));
  PathParser path(trie, local);
  std::vector<uint32_t> state(trie.max_depth() + 1, LocalDfa::kNoState);
  // state[d] is the state after node_at[d] (a node's state depends on its path only, so an entry stays
  // right until overwritten).
  std::vector<uint32_t> node_at(trie.max_depth() + 1, TokenTrie::kRoot);
  state[0] = dfa.intern(local, {});
  if (state[0] == LocalDfa::kNoState) {
    local.pop_to(1);
    return false;
  }
  // The transition into node i from state[depth - 1]: a state, or < 0 (dead, escaped, not named).
  auto step = [&](uint32_t i) {
    const int32_t result = dfa.next(state[trie.depth(i) - 1], trie.byte(i));
    return result == LocalDfa::kUnknown ? transition_by_parser(trie, path, dfa, state, i) : result;
  };
  std::vector<uint32_t> ancestors;
  for (const RunMask::Node& x : inside.exits) {
    // The states along the path above the exit (inside the run, so every byte is accepted), reusing
    // the previous exit's where the paths agree.
    ancestors.clear();
    for (uint32_t p = trie.parent(x.node); p != TokenTrie::kRoot; p = trie.parent(p)) ancestors.push_back(p);
    bool path_ok = true;
    for (size_t d = 1; d <= ancestors.size() && path_ok; ++d) {
      const uint32_t a = ancestors[ancestors.size() - d];
      if (node_at[d] == a) continue;
      const int32_t result = step(a);
      if (result < 0) {
        path_ok = false;
        break;
      }
      state[d] = static_cast<uint32_t>(result);
      node_at[d] = a;
    }
    if (!path_ok) {
      out.escapes.push_back({x.node, x.code});
      continue;
    }
    const uint32_t end = trie.subtree_end(x.node);
    for (uint32_t i = x.node; i < end;) {
      const uint32_t depth = trie.depth(i);
      const int32_t result = step(i);
      if (result == LocalDfa::kDead) {
        i = trie.subtree_end(i);
        continue;
      }
      if (result < 0) {
        out.escapes.push_back({i, x.code});
        i = trie.subtree_end(i);
        continue;
      }
      state[depth] = static_cast<uint32_t>(result);
      node_at[depth] = i;
      for (int32_t id : trie.tokens_at(i)) out.tokens.push_back({id, x.code});
      ++i;
    }
  }
  local.pop_to(1);
  return true;
}

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

size_t precompute_run_classes(const CompiledGrammar& grammar, size_t max_classes) {
  const ParserTables& tables = grammar.tables();
  EarleyParser local(tables);
  size_t stored = 0;
  for (const RepeatRun& run : tables.runs) {
    if (stored >= max_classes) break;
    if (grammar.find_run_inside(run.run_class) != nullptr) continue;
    auto mask = std::make_shared<RunMask>();
    if (!grammar.with_local_dfa(
            [&](LocalDfa& dfa) { return walk_run_inside(grammar.vocab(), run, local, dfa, *mask); }))
      continue;
    grammar.store_run_inside(run.run_class, std::move(mask));
    ++stored;
  }
  return stored;
}

size_t precompute_loop_states(const CompiledGrammar& grammar, size_t max_states) {
  const ParserTables& tables = grammar.tables();
  EarleyParser local(tables);
  std::vector<uint64_t> key;
  size_t stored = 0;
  for (uint32_t kind = 0; kind < tables.n_grammar_kinds && stored < max_states; ++kind) {
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
