// Repeat runs (repeat_run.h): every position of every run of a grammar, its mask derived from the run's
// one shadow walk against the plain Earley walk of that position (walk_state_mask_plain), on random
// regexes with bounded repeats, JSON Schemas with minLength/maxLength and random vocabularies (quotes,
// escapes, multi-byte UTF-8), with a DFA large enough and one bounded to 3 states (the escape fallback).
//
// The derived mask may leave more to the escape walk than the plain one (ambiguous copies), never less:
// each token the plain walk accepts is accepted or under a derived escape node, each derived token is one
// the plain walk accepts, and each plain escape node lies under a derived one.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/state_mask_walk.h"
#include "grammar/testing/grammar_fixtures.h"
#include "grammar/token_bitmask.h"

namespace ds::grammar {
namespace {

// Node `node` is inside one of `roots`' subtrees (or is one).
bool under_any(const TokenTrie& trie, const std::vector<uint32_t>& roots, uint32_t node) {
  for (uint32_t r : roots)
    if (node >= r && node < trie.subtree_end(r)) return true;
  return false;
}

struct Counts {
  int positions = 0;
  int identical = 0;
};

void compare_runs(const Grammar& g, const TokenTrie& trie, size_t max_dfa_states, const std::string& what,
                  Counts& counts) {
  const ParserTables tables = ParserTables::build(g);
  LocalDfa dfa(tables, max_dfa_states);
  EarleyParser local(tables);
  std::vector<int32_t> node_of(trie.vocab_size(), -1);
  for (uint32_t i = 0; i < trie.n_nodes(); ++i)
    for (int32_t id : trie.tokens_at(i)) node_of[static_cast<size_t>(id)] = static_cast<int32_t>(i);
  const size_t words = bitmask_words(trie.vocab_size());
  for (size_t r = 0; r < tables.runs.size(); ++r) {
    const RepeatRun& run = tables.runs[r];
    // The class walk from a fresh DFA with the class's first run, as the grammar would share it.
    const RepeatRun* first = &run;
    for (const RepeatRun& other : tables.runs)
      if (other.run_class == run.run_class) {
        first = &other;
        break;
      }
    RunMask inside, exits;
    if (dfa.full()) dfa.clear();
    ASSERT_TRUE(walk_run_inside(trie, *first, local, dfa, inside)) << what << " run " << r;
    if (dfa.full()) dfa.clear();
    ASSERT_TRUE(walk_run_exits(trie, run, inside, local, dfa, exits)) << what << " run " << r;
    EXPECT_EQ(local.n_sets(), 1u);
    for (uint32_t k = 0; k <= run.n_copies; ++k) {
      const uint32_t kind = run.first_kind + k;
      local.reset_local_items(std::span<const uint32_t>(&kind, 1));
      StateMask plain;
      walk_state_mask_plain(trie, local, plain);
      StateMask derived;
      derive_run_position(run, inside, exits, k, words, derived.accepted, derived.escape_nodes);
      const std::string where = what + " run " + std::to_string(r) + " {" + std::to_string(run.n_required) +
                                "," + std::to_string(run.n_copies) + "} position " + std::to_string(k);
      ++counts.positions;
      if (plain.accepted == derived.accepted && plain.escape_nodes == derived.escape_nodes) {
        ++counts.identical;
        continue;
      }
      for (size_t id = 0; id < trie.vocab_size(); ++id) {
        const bool p = bitmask_test(plain.accepted, static_cast<int32_t>(id));
        const bool d = bitmask_test(derived.accepted, static_cast<int32_t>(id));
        ASSERT_FALSE(d && !p) << where << ": token '" << trie.token_bytes(static_cast<int32_t>(id))
                              << "' derived but not accepted by the plain walk";
        ASSERT_FALSE(p && !d && !under_any(trie, derived.escape_nodes, static_cast<uint32_t>(node_of[id])))
            << where << ": token '" << trie.token_bytes(static_cast<int32_t>(id)) << "' lost";
      }
      for (uint32_t e : plain.escape_nodes)
        ASSERT_TRUE(under_any(trie, derived.escape_nodes, e))
            << where << ": plain escape node " << e << " lost";
    }
  }
}

std::string random_bounded_regex(std::mt19937& rng) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const char* atoms[] = {"a", "[ab]", "[^\"\\\\]", "(ab|c)", "(a|ab)", "\\d", ".", "é", "(é|x)", "[a-c]"};
  const char* tails[] = {"\"", "x", "a", "b\"c", "\"[a-z]*\"", ""};
  std::string out = pick(2) == 0 ? "\"" : "";
  const int n_parts = 1 + pick(3);
  for (int i = 0; i < n_parts; ++i) {
    const int lo = pick(4);
    const int hi = lo + pick(7);
    out += std::string(atoms[pick(10)]) + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    out += tails[pick(6)];
  }
  return out;
}

TEST(RepeatRun, DerivedPositionsMatchThePlainWalkOnRandomRegexes) {
  std::mt19937 rng(31);
  Counts counts, small;
  int runs = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::string pattern = random_bounded_regex(rng);
    Result<Grammar> g = compile_regex(pattern);
    if (!g.ok()) continue;
    runs += static_cast<int>(ParserTables::build(*g).runs.size());
    auto vocab = testing::random_vocab(rng, "ab\"xc0123\\\xc3\xa9", 400, 7);
    compare_runs(*g, *vocab, 1 << 14, "/" + pattern + "/", counts);
    compare_runs(*g, *vocab, 3, "/" + pattern + "/ with a 3-state DFA", small);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(runs, 40) << "too few repeat runs found";
  EXPECT_GT(counts.positions, 400);
  EXPECT_GT(counts.identical, counts.positions / 3) << "the derivation escapes far more than the plain walk";
}

TEST(RepeatRun, DerivedPositionsMatchThePlainWalkOnBoundedJsonStrings) {
  JsonSchemaOptions flexible;
  flexible.flexible_whitespace = true;
  std::vector<Grammar> grammars;
  for (const char* schema : {
           R"({"type":"object","properties":{"a":{"type":"string","maxLength":12},"b":{"type":"string",
                "minLength":3,"maxLength":7},"c":{"type":"array","items":{"type":"string","minLength":2,
                "maxLength":4},"maxItems":3},"d":{"type":"string","minLength":5}},"required":["a","b"]})",
           R"({"type":"array","items":{"type":"string","maxLength":30},"minItems":1,"maxItems":5})",
       }) {
    for (const JsonSchemaOptions& o : {JsonSchemaOptions{}, flexible}) {
      Result<Grammar> g = compile_json_schema(schema, o);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      grammars.push_back(std::move(*g));
    }
  }
  std::mt19937 rng(8);
  Counts counts, small;
  for (size_t i = 0; i < grammars.size(); ++i) {
    EXPECT_GE(ParserTables::build(grammars[i]).runs.size(), 2u) << "grammar " << i;
    auto vocab = testing::random_vocab(rng, "{}[]\":, \n0123abxyz\\u\xc3\xa9\xe4\xb8\xad", 1500, 8);
    compare_runs(grammars[i], *vocab, 1 << 14, "grammar " + std::to_string(i), counts);
    compare_runs(grammars[i], *vocab, 3, "grammar " + std::to_string(i) + " with a 3-state DFA", small);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(counts.positions, 100);
  EXPECT_GT(counts.identical, counts.positions / 2);
}

}  // namespace
}  // namespace ds::grammar
