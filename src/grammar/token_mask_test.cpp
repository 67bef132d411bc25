// The fast mask (trie walk + per-state cache + escape subtrees) against the plain reference (every
// token's bytes tried), along random walks through random grammars and vocabularies, and on the real
// DeepSeek-V3 vocabulary when it is present.
#include <gtest/gtest.h>

#include <filesystem>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_compiler.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/testing/grammar_fixtures.h"
#include "grammar/token_bitmask.h"
#include "tokenizer/tokenizer.h"

namespace ds::grammar {
namespace {

// Walks `steps` tokens, each drawn uniformly from the fast mask, checking it equals the reference mask.
void check_walk(std::shared_ptr<const CompiledGrammar> g, std::mt19937& rng, int steps,
                const std::string& what) {
  GrammarMatcher m(g);
  const size_t words = bitmask_words(g->vocab().vocab_size());
  std::vector<uint32_t> fast(words), ref(words);
  for (int step = 0; step < steps; ++step) {
    m.fill_next_token_mask(fast);
    m.fill_next_token_mask_reference(ref);
    for (size_t w = 0; w < words; ++w) {
      if (fast[w] == ref[w]) continue;
      const uint32_t diff = fast[w] ^ ref[w];
      const int bit = __builtin_ctz(diff);
      const int32_t id = static_cast<int32_t>(w * 32 + static_cast<size_t>(bit));
      FAIL() << what << ": step " << step << " token " << id << " '" << g->vocab().token_bytes(id)
             << "' fast=" << ((fast[w] >> bit) & 1) << " reference=" << ((ref[w] >> bit) & 1);
    }
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < g->vocab().vocab_size(); ++id) {
      if (bitmask_test(fast, static_cast<int32_t>(id))) allowed.push_back(static_cast<int32_t>(id));
    }
    if (allowed.empty()) {
      EXPECT_TRUE(m.is_terminated()) << what << ": empty mask at step " << step << " in a live state";
      return;
    }
    const int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    ASSERT_TRUE(m.accept_token(id)) << what << ": mask allowed token " << id
                                    << " but accept_token refused it";
    // Now and then roll back a few tokens: the next masks must still agree.
    if (m.n_tokens() > 3 && std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
      ASSERT_TRUE(m.rollback(2));
    }
    if (m.is_terminated()) return;
  }
}

TEST(TokenMask, FastEqualsReferenceOnRandomVocabularies) {
  const char* patterns[] = {
      R"(\{"a":(\d+|"[a-z ]*")(,"b":\[(\d+(,\d+)*)?\])?\})",
      R"((ab|a|b)*c{2,4}(x|yz)?)",
      R"([a-c]{0,6}"[^"]*"\d{1,3})",
      R"(((a|b)(c|d)*)+e)",
      R"([a-c ]{0,70})",  // wider than 32: nested blocks of flat copies, the grammar's end right after
  };
  std::mt19937 rng(1234);
  for (const char* pattern : patterns) {
    Result<Grammar> g = compile_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
    for (int trial = 0; trial < 4; ++trial) {
      auto vocab = testing::random_vocab(rng, "abcdexyz{}[]\":, 0123456789", 600, 6);
      auto cg = testing::compile_for(*g, vocab);
      for (int walk = 0; walk < 6; ++walk) check_walk(cg, rng, 40, pattern);
      EXPECT_GT(cg->n_cached_states(), 0u);
    }
  }
}

TEST(TokenMask, FastEqualsReferenceOnSchemaAndGbnfGrammars) {
  std::vector<Grammar> grammars;
  JsonSchemaOptions flexible;
  flexible.flexible_whitespace = true;
  for (
      const char* schema : {
          R"({"type":"object","properties":{"a":{"type":"string","maxLength":5},"b":{"type":"array",
               "items":{"type":"integer","minimum":-20,"maximum":300},"maxItems":4},"c":{"enum":["x","yz",null]}},
               "required":["a"]})",
          R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":["integer","string"]},"k":{"type":"array",
               "items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})",
          R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"e":{"type":"string",
               "format":"email"},"f":{"anyOf":[{"type":"number"},{"type":"boolean"}]}}})",
      }) {
    for (const JsonSchemaOptions& o : {JsonSchemaOptions{}, flexible}) {
      Result<Grammar> g = compile_json_schema(schema, o);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      grammars.push_back(std::move(*g));
    }
  }
  Result<Grammar> any = compile_any_json_object();
  ASSERT_TRUE(any.ok());
  grammars.push_back(std::move(*any));
  Result<Grammar> expr = compile_gbnf("root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]+ | \"(\" e \")\"\n");
  ASSERT_TRUE(expr.ok()) << expr.status().to_string();
  grammars.push_back(std::move(*expr));
  std::mt19937 rng(99);
  for (size_t i = 0; i < grammars.size(); ++i) {
    for (int trial = 0; trial < 3; ++trial) {
      auto vocab = testing::random_vocab(rng, "{}[]\":, \n0123456789-+.eEabvkxyzTF@()\xc3\xa9", 800, 5);
      auto cg = testing::compile_for(grammars[i], vocab);
      for (int walk = 0; walk < 5; ++walk) check_walk(cg, rng, 40, "grammar " + std::to_string(i));
    }
  }
}

// Bounded repeats (minLength/maxLength, {m,n}): their positions' masks are derived from one shadow walk
// per run (repeat_run.h); along random walks every mask must equal the reference.
TEST(TokenMask, RepeatRunPositionsGiveTheReferenceMasks) {
  JsonSchemaOptions flexible;
  flexible.flexible_whitespace = true;
  std::vector<std::pair<Grammar, std::string>> grammars;
  for (const JsonSchemaOptions& o : {JsonSchemaOptions{}, flexible}) {
    Result<Grammar> g = compile_json_schema(
        R"({"type":"object","properties":{"a":{"type":"string","maxLength":9},"b":{"type":"array","items":
             {"type":"string","minLength":1,"maxLength":3},"maxItems":4},"c":{"type":"string","minLength":2,
             "maxLength":6}},"required":["a","c"]})",
        o);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    grammars.emplace_back(std::move(*g), "schema");
  }
  for (const char* pattern : {R"((a|ab){1,5}b{0,3}"[^"]{2,6}")", R"(\d{2,4}-[a-cé]{0,7}x)"}) {
    Result<Grammar> g = compile_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
    grammars.emplace_back(std::move(*g), pattern);
  }
  std::mt19937 rng(4242);
  size_t derived = 0;
  for (auto& [g, what] : grammars) {
    for (int trial = 0; trial < 3; ++trial) {
      auto vocab = testing::random_vocab(rng, "{}[]\":, \n0123abcxyz-\\u\xc3\xa9", 900, 7);
      auto cg = testing::compile_for(g, vocab);
      for (int walk = 0; walk < 6; ++walk) check_walk(cg, rng, 40, what);
      derived += cg->n_run_positions_derived();
    }
  }
  EXPECT_GT(derived, 50u) << "the repeat-run derivation was hardly used";
}

// GrammarCompiler computes the loop states' masks at compile time (precompute_loop_states): decoding
// then starts from those cache entries, and every mask must still equal the reference.
TEST(TokenMask, PrecomputedLoopStatesGiveTheReferenceMasks) {
  std::mt19937 rng(5);
  auto vocab = testing::random_vocab(rng, "{}[]\":, \n0123456789-+.abxyz\\\xc3\xa9", 1000, 6);
  GrammarCompiler compiler(vocab);
  GrammarSpec spec;
  spec.kind = GrammarSpec::Kind::json_schema;
  spec.source = R"({"type":"object","properties":{"s":{"type":"string"},"t":{"type":"string","maxLength":50},
                   "n":{"type":"array","items":{"type":"number"}}},"required":["s","n"]})";
  Result<std::shared_ptr<const CompiledGrammar>> cg = compiler.compile(spec);
  ASSERT_TRUE(cg.ok()) << cg.status().to_string();
  EXPECT_GT((*cg)->n_cached_states(), 0u) << "no loop state was computed at compile time";
  for (int walk = 0; walk < 8; ++walk) check_walk(*cg, rng, 60, "precomputed schema");
}

TEST(TokenMask, ApplyBitmaskClearsExactlyTheMaskedOutLogits) {
  std::vector<uint32_t> mask(bitmask_words(70), 0);
  for (int32_t id : {0, 5, 31, 32, 63, 69}) bitmask_set(mask, id);
  std::vector<float> logits(70, 1.0f);
  apply_bitmask(logits, mask);
  for (int32_t i = 0; i < 70; ++i) EXPECT_EQ(std::isinf(logits[i]), !bitmask_test(mask, i)) << i;
  EXPECT_EQ(bitmask_count(mask), 6u);
}

TEST(TokenMask, RealDeepSeekVocabulary) {
  const std::string dir = DS_DEFAULT_TOKENIZER_DIR;
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "no tokenizer at " << dir;
  Result<Tokenizer> tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  Result<TokenTrie> trie = TokenTrie::from_tokenizer(*tok);
  ASSERT_TRUE(trie.ok());
  auto vocab = std::make_shared<const TokenTrie>(std::move(*trie));
  EXPECT_EQ(vocab->vocab_size(), static_cast<size_t>(tok->vocab_size()));
  Result<Grammar> g = compile_regex(
      R"(\{"name": ?"[^"\\]{0,20}", ?"age": ?\d{1,3}, ?"tags": ?\[("[a-zé]*"(, ?"[a-zé]*")*)?\]\})");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto cg = testing::compile_for(std::move(*g), vocab);
  std::mt19937 rng(7);
  check_walk(cg, rng, 12, "real vocabulary");
}

}  // namespace
}  // namespace ds::grammar
