// GrammarCompiler: the front door of the grammar module. Turns a request's constraint (JSON Schema,
// any JSON object, regex, GBNF, a list of choices) into a CompiledGrammar for one vocabulary, and keeps
// compiled grammars by the hash of their source so that repeated schemas compile once and share their
// per-state token cache. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_compiler.h"

namespace ds::grammar {

struct GrammarSpec {
  // dsml_tool_calls: source is the spec of compile_dsml_tool_calls (dsml_tool_grammar.h).
  enum class Kind { json_schema, json_object, regex, gbnf, choice, dsml_tool_calls };
  Kind kind = Kind::json_object;
  std::string source;                // schema JSON text, regex, or grammar text (GBNF, else Lark)
  std::vector<std::string> choices;  // Kind::choice: the output is exactly one of them
  bool flexible_whitespace = false;  // JSON kinds
  // Special tokens the grammar writes as text (dsml_tool_calls: "｜DSML｜"). The vocabulary the
  // grammar is compiled against must hold them with their text as bytes (Engine::compile_grammar
  // keeps a compiler per marker list; TokenTrie::from_tokenizer).
  std::vector<std::string> marker_tokens;
};

struct GrammarCompilerConfig {
  GrammarLimits limits;
  size_t max_cached_grammars = 256;  // least recently used go first
  size_t max_cached_states = 8192;   // per grammar (each holds a 16 KB mask)
  // Loop states (inside strings, digit and whitespace runs) whose masks are computed at compile time
  // rather than at their first visit while decoding (state_mask_walk.h). 0: none.
  size_t max_precomputed_states = 16;
};

class GrammarCompiler {
 public:
  GrammarCompiler(std::shared_ptr<const TokenTrie> vocab, GrammarCompilerConfig config = {});

  // Errors are the compilers' (grammar_bad_input / grammar_unsupported / grammar_too_large /
  // grammar_empty), their messages naming the position or the JSON path.
  Result<std::shared_ptr<const CompiledGrammar>> compile(const GrammarSpec& spec);
  // The grammar alone (no vocabulary, no cache): what compile() builds.
  static Result<Grammar> build_grammar(const GrammarSpec& spec, const GrammarLimits& limits);

  size_t n_cached() const;
  const TokenTrie& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const TokenTrie> vocab_;
  GrammarCompilerConfig config_;
  mutable std::mutex mu_;  // guards lru_ and index_
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace ds::grammar
