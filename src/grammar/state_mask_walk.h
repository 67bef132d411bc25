// The first visit of a grammar state: which tokens the state accepts whatever the context below it, and
// which trie subtrees depend on that context (StateMask). Two walks with the same result:
//  - walk_state_mask_plain: the local Earley parser pushed at every trie node (the reference);
//  - walk_state_mask: the same walk through LocalDfa, one table lookup per node once the DFA knows the
//    transition, the Earley parser only for transitions not seen before (docs/grammar.md).
// state_mask_walk_test compares them on random grammars, vocabularies and states.
#pragma once

#include "grammar/compiled_grammar.h"
#include "grammar/earley_parser.h"
#include "grammar/local_dfa.h"
#include "grammar/repeat_run.h"
#include "grammar/token_trie.h"

namespace ds::grammar {

// `local` holds one set (EarleyParser::reset_local); it is left that way. `out` is filled from empty.
void walk_state_mask_plain(const TokenTrie& trie, EarleyParser& local, StateMask& out);
void walk_state_mask(const TokenTrie& trie, EarleyParser& local, LocalDfa& dfa, StateMask& out);

// Repeat runs (repeat_run.h). walk_run_inside: the shadow state's walk up to T, shared by the run's
// class; walk_run_exits: the subtrees below `inside.exits` for this run. `local` is reset to the run's
// shadow state and left with one set. False: the run cannot be walked this way (the caller walks its
// positions plainly).
bool walk_run_inside(const TokenTrie& trie, const RepeatRun& run, EarleyParser& local, LocalDfa& dfa,
                     RunMask& out);
bool walk_run_exits(const TokenTrie& trie, const RepeatRun& run, const RunMask& inside, EarleyParser& local,
                    LocalDfa& dfa, RunMask& out);

// Grammar-compile time: the StateMask of every loop state (an item whose next element is starred, alone
// after a scan: the inside of a string, a run of digits or whitespace), so that decoding never walks
// the trie for them. At most max_states states; returns how many were stored.
size_t precompute_loop_states(const CompiledGrammar& grammar, size_t max_states);
// The same for repeat runs: walk_run_inside of up to max_classes run classes.
size_t precompute_run_classes(const CompiledGrammar& grammar, size_t max_classes);

}  // namespace ds::grammar
