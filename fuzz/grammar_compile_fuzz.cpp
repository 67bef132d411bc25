// libFuzzer target: the grammar compilers (first byte picks regex / JSON Schema / GBNF / Lark) over arbitrary
// text must return a grammar or a Status with a one-line message (never throw, crash, hang or hit UB);
// for every grammar they return, the fast token mask must equal the reference mask along a short walk
// on a small byte vocabulary.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/token_bitmask.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ds::grammar::GrammarLimits limits;
  limits.max_elements = 20'000;
  limits.max_rules = 5'000;
  limits.max_repeat = 64;
  limits.max_nesting = 40;
  limits.max_compile_ms = 500;
  ds::Result<ds::grammar::Grammar> g = ds::Status{ds::ErrorCode::internal, "unset"};
  switch (data[0] % 4) {
    case 0:
      g = ds::grammar::compile_regex(text, limits);
      break;
    case 1: {
      ds::grammar::JsonSchemaOptions o;
      o.limits = limits;
      o.flexible_whitespace = (data[0] & 4) != 0;
      g = ds::grammar::compile_json_schema(text, o);
      break;
    }
    case 2:
      g = ds::grammar::compile_gbnf(text, limits);
      break;
    default:
      g = ds::grammar::compile_lark(text, limits);
      break;
  }
  if (!g.ok()) {
    if (g.status().message().empty() || g.status().code() == ds::ErrorCode::internal) __builtin_trap();
    return 0;
  }
  static const std::shared_ptr<const ds::grammar::TokenTrie> vocab = [] {
    std::vector<std::string> bytes{""};
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* t :
         {"\"", "\":", "{\"", "\"}", "ab", "12", "true", "null", ", ", "[1", "é", "\xc3", "\xa9x"})
      bytes.emplace_back(t);
    return std::make_shared<const ds::grammar::TokenTrie>(ds::grammar::TokenTrie::build(bytes, 0));
  }();
  auto compiled = std::make_shared<const ds::grammar::CompiledGrammar>(std::move(*g), vocab, 64);
  ds::grammar::GrammarMatcher m(compiled);
  std::vector<uint32_t> fast(ds::grammar::bitmask_words(vocab->vocab_size())), ref(fast.size());
  for (size_t step = 0; step < 8; ++step) {
    m.fill_next_token_mask(fast);
    m.fill_next_token_mask_reference(ref);
    if (fast != ref) __builtin_trap();
    int32_t pick = -1;
    for (size_t id = 0, seen = 0; id < vocab->vocab_size(); ++id)
      if (ds::grammar::bitmask_test(fast, static_cast<int32_t>(id)) && seen++ == (data[step % size] % 7))
        pick = static_cast<int32_t>(id);
    if (pick < 0 || !m.accept_token(pick)) break;
  }
  return 0;
}
