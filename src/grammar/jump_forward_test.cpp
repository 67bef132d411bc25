// Jump-forward decoding (jump_forward.h): the forced bytes of hand grammars, and on the real V3 tokenizer
// random decodes of a schema with fixed keys where every forced run is appended as tokens: the tokens
// spell a prefix of the forced text, the matcher accepts them, and the outputs stay valid JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/grammar_compiler.h"
#include "grammar/jump_forward.h"
#include "grammar/regex_compiler.h"
#include "grammar/testing/grammar_fixtures.h"
#include "grammar/token_bitmask.h"
#include "tokenizer/tokenizer.h"

namespace ds::grammar {
namespace {

TEST(JumpForward, ForcedBytesStopAtAChoiceOrAnAcceptingState) {
  std::mt19937 rng(3);
  auto vocab = testing::random_vocab(rng, "abcdex", 50, 4);
  Result<Grammar> g = compile_regex("abc(d|e)xx(y)?");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(testing::compile_for(std::move(*g), vocab));
  EXPECT_EQ(m.forced_bytes(), "abc");
  EXPECT_EQ(m.forced_bytes(2), "ab");
  EXPECT_EQ(m.n_tokens(), 0u);
  ASSERT_TRUE(m.accept_bytes("abce"));
  EXPECT_EQ(m.forced_bytes(), "xx");  // then accepting: EOS or 'y' is a choice
  ASSERT_TRUE(m.accept_bytes("xx"));
  EXPECT_EQ(m.forced_bytes(), "");
}

TEST(JumpForward, RealVocabularyForcedTokensKeepOutputsValid) {
  const std::string dir = DS_DEFAULT_TOKENIZER_DIR;
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "no tokenizer at " << dir;
  Result<Tokenizer> tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  Result<TokenTrie> trie = TokenTrie::from_tokenizer(*tok);
  ASSERT_TRUE(trie.ok());
  auto vocab = std::make_shared<const TokenTrie>(std::move(*trie));
  GrammarCompiler compiler(vocab);
  GrammarSpec spec;
  spec.kind = GrammarSpec::Kind::json_schema;
  spec.source =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer",
      "minimum":0,"maximum":120},"kind":{"enum":["cat","dog"]}},"required":["name","age","kind"]})";
  Result<std::shared_ptr<const CompiledGrammar>> cg = compiler.compile(spec);
  ASSERT_TRUE(cg.ok()) << cg.status().to_string();
  std::mt19937 rng(11);
  std::vector<uint32_t> mask(bitmask_words(vocab->vocab_size()));
  size_t n_forced = 0, n_sampled = 0;
  for (int decode = 0; decode < 6; ++decode) {
    GrammarMatcher m(*cg);
    std::string text;
    for (int step = 0; step < 200 && !m.is_terminated(); ++step) {
      const std::string forced = m.forced_bytes();
      const std::vector<int32_t> jf = jump_forward_tokens(m, *tok);
      std::string spelled;
      for (int32_t id : jf) spelled += vocab->token_bytes(id);
      ASSERT_EQ(forced.compare(0, spelled.size(), spelled), 0) << "'" << spelled << "' vs '" << forced << "'";
      if (!jf.empty()) {
        ASSERT_LT(spelled.size(), forced.size()) << "the last forced token is left to the model";
      }
      text += spelled;
      n_forced += jf.size();
      m.fill_next_token_mask(mask);
      std::vector<int32_t> allowed;
      for (size_t id = 0; id < vocab->vocab_size(); ++id)
        if (bitmask_test(mask, static_cast<int32_t>(id)) && static_cast<int32_t>(id) != vocab->eos_id())
          allowed.push_back(static_cast<int32_t>(id));
      if (allowed.empty()) break;
      const int32_t id = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(id));
      text += vocab->token_bytes(id);
      ++n_sampled;
    }
    ASSERT_TRUE(m.is_accepting()) << text;
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_TRUE(doc.contains("name") && doc.contains("age") && doc.contains("kind")) << text;
  }
  EXPECT_GT(n_forced, 6u) << "no key was jumped over";
  EXPECT_GT(n_sampled, 0u);
}

}  // namespace
}  // namespace ds::grammar
