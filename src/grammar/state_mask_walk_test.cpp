// The DFA walk of a first-visit state (walk_state_mask) against the plain Earley walk
// (walk_state_mask_plain): the same accepted tokens and the same escape nodes, on random regex grammars,
// schema and GBNF grammars, random vocabularies, and random states along random parses. One DFA serves
// all the states of a grammar (so transitions learnt in one state are reused in the next), and a DFA
// bounded to a few states checks the fallback to the parser.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/state_mask_walk.h"
#include "grammar/testing/grammar_fixtures.h"

namespace ds::grammar {
namespace {

// A random regex over a small alphabet: literals, classes, groups with alternation, quantifiers.
std::string random_regex(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::string out;
  const int n_items = 1 + pick(4);
  for (int i = 0; i < n_items; ++i) {
    std::string atom;
    switch (depth > 0 ? pick(6) : pick(4)) {
      case 0:
      case 1:
        atom = std::string(1, "ab\"xé"[pick(4)]);
        break;
      case 2:
        atom = pick(2) == 0 ? "[a-c]" : "[^\"\\\\]";
        break;
      case 3:
        atom = pick(2) == 0 ? "\\d" : ".";
        break;
      default:
        atom = "(" + random_regex(rng, depth - 1) + "|" + random_regex(rng, depth - 1) + ")";
    }
    const char* quant[] = {"", "", "*", "+", "?", "{1,3}", "{0,5}"};
    out += atom + quant[pick(7)];
  }
  return out;
}

std::string describe(const StateMask& m) {
  size_t n = 0;
  for (uint32_t w : m.accepted) n += static_cast<size_t>(__builtin_popcount(w));
  return std::to_string(n) + " accepted, " + std::to_string(m.escape_nodes.size()) + " escapes";
}

// Random parses through `g`: at every state both walks must agree. Returns the DFA's hit count.
uint64_t compare_walks(const Grammar& g, const TokenTrie& vocab, std::mt19937& rng, size_t max_dfa_states,
                       const std::string& what, int* n_states) {
  const ParserTables tables = ParserTables::build(g);
  LocalDfa dfa(tables, max_dfa_states);
  EarleyParser full(tables), local(tables);
  for (int parse = 0; parse < 3; ++parse) {
    full.reset();
    for (int step = 0; step < 20; ++step) {
      local.reset_local(full);
      StateMask plain, fast;
      walk_state_mask_plain(vocab, local, plain);
      if (dfa.full()) dfa.clear();
      walk_state_mask(vocab, local, dfa, fast);
      EXPECT_EQ(local.n_sets(), 1u);
      if (plain.accepted != fast.accepted || plain.escape_nodes != fast.escape_nodes) {
        ADD_FAILURE() << what << ": parse " << parse << " step " << step << ": plain " << describe(plain)
                      << ", dfa " << describe(fast);
        return dfa.n_hits;
      }
      ++*n_states;
      // Advance by a token the full parser accepts, the first from a random id on (none: the parse is over).
      bool moved = false;
      const size_t first = std::uniform_int_distribution<size_t>(0, vocab.vocab_size() - 1)(rng);
      for (size_t k = 0; k < vocab.vocab_size() && !moved; ++k) {
        const auto id = static_cast<int32_t>((first + k) % vocab.vocab_size());
        const std::string& bytes = vocab.token_bytes(id);
        if (bytes.empty()) continue;
        const size_t before = full.n_sets();
        moved = true;
        for (char c : bytes)
          if (!full.push_byte(static_cast<uint8_t>(c))) {
            full.pop_to(before);
            moved = false;
            break;
          }
      }
      if (!moved) break;
    }
  }
  return dfa.n_hits;
}

TEST(StateMaskWalk, DfaWalkEqualsPlainWalkOnRandomRegexes) {
  std::mt19937 rng(2024);
  uint64_t hits = 0;
  int n_states = 0;
  for (int trial = 0; trial < 30; ++trial) {
    const std::string pattern = random_regex(rng, 2);
    Result<Grammar> g = compile_regex(pattern);
    if (!g.ok()) continue;  // an empty language now and then
    auto vocab = testing::random_vocab(rng, "ab\"xc0123\\\xc3\xa9", 300, 6);
    hits += compare_walks(*g, *vocab, rng, 1 << 14, "/" + pattern + "/", &n_states);
    compare_walks(*g, *vocab, rng, 3, "/" + pattern + "/ with a 3-state DFA", &n_states);
  }
  EXPECT_GT(hits, 0u) << "the DFA never reused a transition";
  EXPECT_GT(n_states, 500) << "too few states compared";
}

TEST(StateMaskWalk, DfaWalkEqualsPlainWalkOnSchemaAndGbnfGrammars) {
  std::vector<Grammar> grammars;
  JsonSchemaOptions flexible;
  flexible.flexible_whitespace = true;
  for (
      const char* schema : {
          R"({"type":"object","properties":{"a":{"type":"string","maxLength":40},"b":{"type":"array",
               "items":{"type":"string"},"maxItems":3},"c":{"enum":["x","yz",null]}},"required":["a"]})",
          R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":["integer","string"]},"k":{"type":"array",
               "items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})",
      }) {
    for (const JsonSchemaOptions& o : {JsonSchemaOptions{}, flexible}) {
      Result<Grammar> g = compile_json_schema(schema, o);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      grammars.push_back(std::move(*g));
    }
  }
  Result<Grammar> expr = compile_gbnf("root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]+ | \"(\" e \")\"\n");
  ASSERT_TRUE(expr.ok());
  grammars.push_back(std::move(*expr));
  std::mt19937 rng(77);
  int n_states = 0;
  for (size_t i = 0; i < grammars.size(); ++i) {
    auto vocab =
        testing::random_vocab(rng, "{}[]\":, \n0123456789-+abvkxyz\\()\xc3\xa9\xe4\xb8\xad", 1500, 7);
    const uint64_t hits =
        compare_walks(grammars[i], *vocab, rng, 1 << 14, "grammar " + std::to_string(i), &n_states);
    EXPECT_GT(hits, 0u) << "grammar " << i;
    compare_walks(grammars[i], *vocab, rng, 5, "grammar " + std::to_string(i) + " with a 5-state DFA",
                  &n_states);
  }
  EXPECT_GT(n_states, 300) << "too few states compared";
}

}  // namespace
}  // namespace ds::grammar
