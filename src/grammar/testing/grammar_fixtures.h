// Test helpers: compile a Grammar against a small byte vocabulary, feed strings.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar_matcher.h"

namespace ds::grammar::testing {

// Does the grammar's language contain `text` exactly?
inline bool grammar_accepts(const ParserTables& tables, std::string_view text) {
  EarleyParser p(tables);
  for (char c : text)
    if (!p.push_byte(static_cast<uint8_t>(c))) return false;
  return p.is_accepting();
}

inline bool grammar_accepts(const Grammar& g, std::string_view text) {
  const ParserTables t = ParserTables::build(g);
  return grammar_accepts(t, text);
}

// A vocabulary: id 0 = EOS (no bytes), ids 1..256 = every single byte, then n_random random strings of
// 2..max_len bytes over `alphabet` (duplicates kept: several ids may share bytes, as in real vocabs).
inline std::shared_ptr<const TokenTrie> random_vocab(std::mt19937& rng, std::string_view alphabet,
                                                     size_t n_random, size_t max_len) {
  std::vector<std::string> bytes(1);
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  std::uniform_int_distribution<size_t> len(2, max_len), pick(0, alphabet.size() - 1);
  for (size_t i = 0; i < n_random; ++i) {
    std::string s;
    for (size_t n = len(rng); s.size() < n;) s += alphabet[pick(rng)];
    bytes.push_back(std::move(s));
  }
  return std::make_shared<const TokenTrie>(TokenTrie::build(bytes, 0));
}

inline std::shared_ptr<const CompiledGrammar> compile_for(Grammar g, std::shared_ptr<const TokenTrie> vocab) {
  return std::make_shared<const CompiledGrammar>(std::move(g), std::move(vocab), 1 << 16);
}

}  // namespace ds::grammar::testing
