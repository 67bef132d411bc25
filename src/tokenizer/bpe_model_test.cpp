#include "tokenizer/bpe_model.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>

#include <fmt/format.h>

#include "tokenizer/tiny_tokenizer_fixture.h"

namespace ds {
namespace {

BpeModelSpec tiny_spec() {
  BpeModelSpec spec;
  const ByteLevelAlphabet alphabet;
  for (int b = 0; b < 256; ++b) {
    spec.vocab.emplace_back(std::string(alphabet.char_of_byte(static_cast<uint8_t>(b))),
                            testing::tiny_byte_id(static_cast<unsigned char>(b)));
  }
  int next_id = testing::kTinyFirstMergeId;
  for (const auto& [l, r] : testing::tiny_merges()) {
    spec.vocab.emplace_back(l + r, next_id++);
    spec.merges.emplace_back(l, r);
  }
  return spec;
}

std::vector<int32_t> encode(const BpeModel& m, std::string_view word) {
  std::vector<int32_t> ids;
  m.encode_word(word, ids);
  return ids;
}

// The textbook loop, written independently: merge the lowest-ranked adjacent pair, leftmost on
// ties, until no pair has a rank.
std::vector<std::string> reference_bpe(const BpeModelSpec& spec, std::string_view word) {
  const ByteLevelAlphabet alphabet;
  std::vector<std::string> symbols;
  for (char c : word) symbols.emplace_back(alphabet.char_of_byte(static_cast<uint8_t>(c)));
  while (symbols.size() > 1) {
    int best_rank = INT_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      for (size_t r = 0; r < spec.merges.size(); ++r) {
        if (static_cast<int>(r) >= best_rank) break;
        if (spec.merges[r].first == symbols[i] && spec.merges[r].second == symbols[i + 1]) {
          best_rank = static_cast<int>(r);
          best = i;
        }
      }
    }
    if (best_rank == INT_MAX) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return symbols;
}

TEST(BpeModel, HandComputedMerges) {
  const BpeModelSpec spec = tiny_spec();
  Result<BpeModel> m = BpeModel::build(spec, "test");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(encode(*m, " the"), std::vector<int32_t>({261}));  // Ġ t -> Ġt, h e -> he, Ġt he
  EXPECT_EQ(encode(*m, "hello"), std::vector<int32_t>({264}));
  EXPECT_EQ(encode(*m, "hellos"), std::vector<int32_t>({264, testing::tiny_byte_id('s')}));
  // "aaaaa": a a -> aa twice (leftmost first), then aa aa -> aaaa, leaving the last a.
  EXPECT_EQ(encode(*m, "aaaaa"), std::vector<int32_t>({266, testing::tiny_byte_id('a')}));
  EXPECT_EQ(encode(*m, "aaa"), std::vector<int32_t>({265, testing::tiny_byte_id('a')}));
  EXPECT_EQ(encode(*m, "\xFF"), std::vector<int32_t>({testing::tiny_byte_id(0xFF)}));
  EXPECT_TRUE(encode(*m, "").empty());
}

TEST(BpeModel, ShortLongAndCachedPathsMatchTheReference) {
  const BpeModelSpec spec = tiny_spec();
  Result<BpeModel> m = BpeModel::build(spec, "test");
  ASSERT_TRUE(m.ok());
  std::mt19937 rng(42);
  const std::string alphabet = "aehlot 12\xC3\xA9";
  for (int trial = 0; trial < 500; ++trial) {
    std::string word(1 + rng() % (trial < 400 ? 20 : 200), ' ');
    for (char& c : word) c = alphabet[rng() % alphabet.size()];
    std::vector<int32_t> expected;
    for (const std::string& s : reference_bpe(spec, word)) expected.push_back(*m->token_to_id(s));
    std::vector<int32_t> short_path, heap_path;
    m->encode_word_uncached(word, short_path, /*force_heap=*/false);
    m->encode_word_uncached(word, heap_path, /*force_heap=*/true);
    ASSERT_EQ(short_path, expected) << "word " << word;
    ASSERT_EQ(heap_path, expected) << "word " << word;
    ASSERT_EQ(encode(*m, word), expected) << "first (cached) call, word " << word;
    ASSERT_EQ(encode(*m, word), expected) << "second (cache hit) call, word " << word;
  }
}

TEST(BpeModel, UnknownBytesUseUnkOrVanish) {
  BpeModelSpec spec;
  spec.vocab = {{"a", 0}, {"b", 1}, {"<unk>", 2}};
  Result<BpeModel> no_unk = BpeModel::build(spec, "test");
  ASSERT_TRUE(no_unk.ok());
  EXPECT_EQ(encode(*no_unk, "a?b"), std::vector<int32_t>({0, 1}));  // HF drops it without unk_token
  spec.unk_token = "<unk>";
  Result<BpeModel> unk = BpeModel::build(spec, "test");
  ASSERT_TRUE(unk.ok());
  EXPECT_EQ(encode(*unk, "a??b"), std::vector<int32_t>({0, 2, 2, 1}));
  spec.fuse_unk = true;
  Result<BpeModel> fused = BpeModel::build(spec, "test");
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(encode(*fused, "a??b"), std::vector<int32_t>({0, 2, 1}));
}

TEST(BpeModel, MergeWithUnknownTokenIsABadFile) {
  BpeModelSpec spec;
  spec.vocab = {{"a", 0}, {"b", 1}};
  spec.merges = {{"a", "b"}};  // "ab" is not in the vocab
  Result<BpeModel> m = BpeModel::build(spec, "my.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::tokenizer_bad_file);
  EXPECT_NE(m.status().message().find("my.json: model.merges[0]"), std::string::npos) << m.status().message();
}

TEST(MergeTable, FindsInsertedPairsAndLastDuplicateWins) {
  MergeTable t(2);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(t.insert(i, i + 1, {i, 5000 + i}));  // grows past 2
  EXPECT_FALSE(t.insert(7, 8, {1234, 42}));
  EXPECT_EQ(t.find(7, 8)->rank, 1234);
  EXPECT_EQ(t.find(999, 1000)->merged_id, 5999);
  EXPECT_FALSE(t.find(8, 7).has_value());
  EXPECT_EQ(t.size(), 1000u);
}

TEST(WordCache, StoresAndEvictsWithoutChangingAnswers) {
  const WordCache cache(64);
  std::vector<int32_t> out;
  EXPECT_FALSE(cache.lookup("hello", out));
  const std::vector<int32_t> ids = {1, 2, 3};
  cache.store("hello", ids);
  EXPECT_TRUE(cache.lookup("hello", out));
  EXPECT_EQ(out, ids);
  out.clear();
  EXPECT_FALSE(cache.lookup("hellp", out));
  cache.store(std::string(WordCache::kMaxWordBytes + 1, 'x'), ids);  // too long: not cached
  EXPECT_FALSE(cache.lookup(std::string(WordCache::kMaxWordBytes + 1, 'x'), out));
  const auto key = [](int i) { return fmt::format("w{}", i); };
  for (int i = 0; i < 1000; ++i) cache.store(key(i), std::vector<int32_t>{i});
  int n_hits = 0;
  for (int i = 0; i < 1000; ++i) {
    out.clear();
    if (cache.lookup(key(i), out)) {
      EXPECT_EQ(out, std::vector<int32_t>{i});
      ++n_hits;
    }
  }
  EXPECT_GT(n_hits, 0);
}

}  // namespace
}  // namespace ds
