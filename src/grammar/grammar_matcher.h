// One request's position in a compiled grammar: accepts tokens, rolls back, and fills the mask of the
// tokens allowed next over the whole vocabulary.
//
// Mask = the cached context-independent tokens of the current state (one 16 KB copy) + a walk of the
// escape subtrees with the full parser (docs/grammar.md). EOS is allowed iff the grammar accepts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley_parser.h"

namespace ds::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by the token's bytes (EOS: only when accepting; it ends the match). False: the token is
  // not allowed here and nothing changed.
  bool accept_token(int32_t id);
  // Advances by raw bytes (not a token; rollback() does not count it). False: nothing changed.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted tokens (n <= n_tokens()).
  bool rollback(size_t n);
  size_t n_tokens() const { return token_sets_.size(); }

  bool is_accepting() const { return parser_.is_accepting(); }
  // Accepting and no byte can follow: the output is complete (or EOS was accepted).
  bool is_terminated() const { return eos_accepted_ || (parser_.is_accepting() && !parser_.can_continue()); }

  // mask.size() >= bitmask_words(vocab size). Sets exactly the allowed tokens.
  void fill_next_token_mask(std::span<uint32_t> mask);
  // The plain reference: every token's bytes tried on the parser. Same result, O(vocab · length).
  void fill_next_token_mask_reference(std::span<uint32_t> mask);

  // Jump-forward decoding: the bytes the grammar forces from here, while it does not accept (EOS would be
  // a choice) and exactly one byte can follow; at most max_bytes. The state is unchanged.
  std::string forced_bytes(size_t max_bytes = 256);

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const StateMask> compute_state_mask();
  void walk_subtree(EarleyParser& parser, uint32_t node, std::span<uint32_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  EarleyParser parser_;
  EarleyParser local_;                // scratch for cache misses
  std::vector<uint32_t> token_sets_;  // parser set count after each accepted token
  bool eos_accepted_ = false;
  std::vector<uint64_t> key_;
  std::vector<uint32_t> path_;
  std::vector<uint32_t> synced_;
};

}  // namespace ds::grammar
