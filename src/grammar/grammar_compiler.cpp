#include "grammar/grammar_compiler.h"

#include "grammar/state_mask_walk.h"

#include <fmt/format.h>

#include "grammar/dsml_tool_grammar.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_builder.h"
#include "grammar/regex_compiler.h"

namespace ds::grammar {

namespace {

// The cache key: the whole spec, so two specs share an entry only when they are the same.
std::string spec_key(const GrammarSpec& spec) {
  std::string key = fmt::format("{}|{}|{}|", static_cast<int>(spec.kind), spec.flexible_whitespace ? 1 : 0,
                                spec.source.size());
  key += spec.source;
  for (const std::string& c : spec.choices) {
    key += fmt::format("|{}|", c.size());
    key += c;
  }
  return key;
}

Result<Grammar> choice_grammar(const std::vector<std::string>& choices, const GrammarLimits& limits) {
  if (choices.empty()) return Status{ErrorCode::grammar_empty, "choice: the list of choices is empty"};
  GrammarBuilder b(limits);
  const uint32_t root = b.new_rule("root");
  for (const std::string& c : choices) {
    Alternative a;
    b.append_literal(a, c);
    b.add_alternative(root, std::move(a));
  }
  return b.finish();
}

}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenTrie> vocab, GrammarCompilerConfig config)
    : vocab_(std::move(vocab)), config_(config) {}

Result<Grammar> GrammarCompiler::build_grammar(const GrammarSpec& spec, const GrammarLimits& limits) {
  JsonSchemaOptions json_options;
  json_options.flexible_whitespace = spec.flexible_whitespace;
  json_options.limits = limits;
  switch (spec.kind) {
    case GrammarSpec::Kind::json_schema:
      return compile_json_schema(spec.source, json_options);
    case GrammarSpec::Kind::json_object:
      return compile_any_json_object(json_options);
    case GrammarSpec::Kind::regex:
      return compile_regex(spec.source, limits);
    case GrammarSpec::Kind::gbnf:
      return compile_ebnf(spec.source, limits);
    case GrammarSpec::Kind::choice:
      return choice_grammar(spec.choices, limits);
    case GrammarSpec::Kind::dsml_tool_calls:
      return compile_dsml_tool_calls(spec.source, limits);
  }
  return Status{ErrorCode::internal, "unknown grammar kind"};
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(const GrammarSpec& spec) {
  const std::string key = spec_key(spec);
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: two threads may compile the same spec once each; the second insert wins.
  DS_ASSIGN_OR_RETURN(Grammar g, build_grammar(spec, config_.limits));
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(g), vocab_, config_.max_cached_states);
  precompute_loop_states(*compiled, config_.max_precomputed_states);
  precompute_run_classes(*compiled, config_.max_precomputed_states);
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > config_.max_cached_grammars) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

size_t GrammarCompiler::n_cached() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace ds::grammar
