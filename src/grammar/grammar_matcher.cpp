#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "grammar/state_mask_walk.h"
#include "grammar/token_bitmask.h"

namespace ds::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), parser_(grammar_->tables()), local_(grammar_->tables()) {}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (eos_accepted_) return false;
  const size_t before = parser_.n_sets();
  for (char c : bytes) {
    if (!parser_.push_byte(static_cast<uint8_t>(c))) {
      parser_.pop_to(before);
      return false;
    }
  }
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenTrie& vocab = grammar_->vocab();
  if (eos_accepted_ || id < 0 || static_cast<size_t>(id) >= vocab.vocab_size()) return false;
  if (id == vocab.eos_id()) {
    if (!parser_.is_accepting()) return false;
    eos_accepted_ = true;
    token_sets_.push_back(static_cast<uint32_t>(parser_.n_sets()));
    return true;
  }
  const std::string& bytes = vocab.token_bytes(id);
  if (bytes.empty() || !accept_bytes(bytes)) return false;
  token_sets_.push_back(static_cast<uint32_t>(parser_.n_sets()));
  return true;
}

bool GrammarMatcher::rollback(size_t n) {
  if (n > token_sets_.size()) return false;
  if (n == 0) return true;
  token_sets_.resize(token_sets_.size() - n);
  eos_accepted_ = false;  // EOS is always the last token, so any rollback removes it
  parser_.pop_to(token_sets_.empty() ? 1 : token_sets_.back());
  return true;
}

// Sets every token of `node`'s subtree that `parser` (standing at node's parent) accepts.
void GrammarMatcher::walk_subtree(EarleyParser& parser, uint32_t node, std::span<uint32_t> mask) {
  const TokenTrie& trie = grammar_->vocab();
  const size_t base = parser.n_sets() - trie.depth(node);  // sets before node's first byte, minus one
  const uint32_t end = trie.subtree_end(node);
  for (uint32_t i = node; i < end;) {
    parser.pop_to(base + trie.depth(i));
    if (!parser.push_byte(trie.byte(i))) {
      i = trie.subtree_end(i);
      continue;
    }
    for (int32_t id : trie.tokens_at(i)) bitmask_set(mask, id);
    ++i;
  }
  parser.pop_to(base + trie.depth(node));
}

std::shared_ptr<const StateMask> GrammarMatcher::compute_state_mask() {
  auto state = std::make_shared<StateMask>();
  if (const CompiledGrammar::RunPosition* pos = grammar_->run_position(key_)) {
    // Position k of a bounded repeat: derived from its class's inside walk and its own exit walk
    // (repeat_run.h), each done once per grammar.
    const RepeatRun& run = grammar_->tables().runs[pos->run];
    std::shared_ptr<const RunMask> inside = grammar_->find_run_inside(run.run_class);
    if (inside == nullptr) {
      auto walked = std::make_shared<RunMask>();
      if (grammar_->with_local_dfa(
              [&](LocalDfa& dfa) { return walk_run_inside(grammar_->vocab(), run, local_, dfa, *walked); })) {
        grammar_->store_run_inside(run.run_class, walked);
        inside = std::move(walked);
      }
    }
    std::shared_ptr<const RunMask> exits = inside ? grammar_->find_run_exits(pos->run) : nullptr;
    if (inside != nullptr && exits == nullptr) {
      auto walked = std::make_shared<RunMask>();
      if (grammar_->with_local_dfa([&](LocalDfa& dfa) {
            return walk_run_exits(grammar_->vocab(), run, *inside, local_, dfa, *walked);
          })) {
        grammar_->store_run_exits(pos->run, walked);
        exits = std::move(walked);
      }
    }
    if (exits != nullptr) {
      derive_run_position(run, *inside, *exits, pos->k, bitmask_words(grammar_->vocab().vocab_size()),
                          state->accepted, state->escape_nodes);
      grammar_->count_run_position_derived();
      return state;
    }
  }
  local_.reset_local(parser_);
  grammar_->with_local_dfa([&](LocalDfa& dfa) { walk_state_mask(grammar_->vocab(), local_, dfa, *state); });
  return state;
}

void GrammarMatcher::fill_next_token_mask(std::span<uint32_t> mask) {
  const TokenTrie& trie = grammar_->vocab();
  const size_t words = bitmask_words(trie.vocab_size());
  if (eos_accepted_) {
    std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(words), 0u);
    return;
  }
  parser_.state_key(key_);
  std::shared_ptr<const StateMask> state = grammar_->find_state(key_);
  if (state == nullptr) {
    state = compute_state_mask();
    grammar_->store_state(key_, state);
  }
  std::copy(state->accepted.begin(), state->accepted.end(), mask.begin());
  // Each escape node's subtree is walked with the real parser after pushing the bytes above the node (the
  // local walk accepted every byte of that path, and the full parser's sets contain the local ones).
  // Escape nodes come in preorder, so consecutive ones share ancestors: the parser keeps the path of the
  // previous one and is popped only to the common ancestor.
  const size_t before = parser_.n_sets();
  synced_.clear();  // the nodes whose sets the parser holds after `before`, root first
  for (uint32_t node : state->escape_nodes) {
    path_.clear();
    for (uint32_t p = trie.parent(node); p != TokenTrie::kRoot; p = trie.parent(p)) path_.push_back(p);
    std::reverse(path_.begin(), path_.end());
    size_t keep = 0;
    while (keep < synced_.size() && keep < path_.size() && synced_[keep] == path_[keep]) ++keep;
    parser_.pop_to(before + keep);
    synced_.resize(keep);
    bool ok = true;
    for (size_t j = keep; j < path_.size(); ++j) {
      if (!parser_.push_byte(trie.byte(path_[j]))) {
        ok = false;
        break;
      }
      synced_.push_back(path_[j]);
    }
    if (ok) walk_subtree(parser_, node, mask);  // leaves the parser at the node's parent
  }
  parser_.pop_to(before);
  if (trie.eos_id() >= 0 && parser_.is_accepting()) bitmask_set(mask, trie.eos_id());
}

std::string GrammarMatcher::forced_bytes(size_t max_bytes) {
  std::string out;
  if (eos_accepted_) return out;
  const size_t before = parser_.n_sets();
  while (out.size() < max_bytes && !parser_.is_accepting()) {
    const ByteSet next = parser_.next_bytes();
    int only = -1;
    for (int w = 0; w < 4; ++w) {
      if (next.words[w] == 0) continue;
      if (only >= 0 || (next.words[w] & (next.words[w] - 1)) != 0) {
        only = -2;
        break;
      }
      only = w * 64 + __builtin_ctzll(next.words[w]);
    }
    if (only < 0 || !parser_.push_byte(static_cast<uint8_t>(only))) break;
    out.push_back(static_cast<char>(only));
  }
  parser_.pop_to(before);
  return out;
}

void GrammarMatcher::fill_next_token_mask_reference(std::span<uint32_t> mask) {
  const TokenTrie& trie = grammar_->vocab();
  std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(bitmask_words(trie.vocab_size())), 0u);
  if (eos_accepted_) return;
  for (size_t id = 0; id < trie.vocab_size(); ++id) {
    const std::string& bytes = trie.token_bytes(static_cast<int32_t>(id));
    if (bytes.empty() || static_cast<int32_t>(id) == trie.eos_id()) continue;
    const size_t before = parser_.n_sets();
    bool ok = true;
    for (char c : bytes)
      if (!parser_.push_byte(static_cast<uint8_t>(c))) {
        ok = false;
        break;
      }
    parser_.pop_to(before);
    if (ok) bitmask_set(mask, static_cast<int32_t>(id));
  }
  if (trie.eos_id() >= 0 && parser_.is_accepting()) bitmask_set(mask, trie.eos_id());
}

}  // namespace ds::grammar
