// NumPy's SeedSequence / PCG64 / Generator.integers and the V4.1 Engram hash constants, against
// numbers NumPy 1.24 printed (python3 -c "import numpy as np; ..." as quoted per test).
#include <gtest/gtest.h>

#include "model/engram_hash.h"
#include "model/numpy_random.h"

namespace ds {
namespace {

TEST(NumpyRandom, SeedSequenceState) {
  // np.random.SeedSequence(10007).generate_state(8, np.uint32) / (4, np.uint64)
  const SeedSequence s(10007);
  EXPECT_EQ(s.generate_state32(8),
            (std::vector<uint32_t>{2329349383u, 2010327604u, 3091877797u, 2571032073u, 3362360905u,
                                   3589894878u, 3169929438u, 2105142190u}));
  EXPECT_EQ(s.generate_state64(4), (std::vector<uint64_t>{8634291315755388167ull, 11042498673593962405ull,
                                                          15418481100450270793ull, 9041516862649747678ull}));
}

TEST(NumpyRandom, Pcg64RawDraws) {
  // [np.random.PCG64(10007).random_raw() for _ in range(3)]
  Pcg64 g{SeedSequence(10007)};
  EXPECT_EQ(g.next64(), 15187255322829266483ull);
  EXPECT_EQ(g.next64(), 959186003677246517ull);
  EXPECT_EQ(g.next64(), 7126631698937927467ull);
}

TEST(NumpyRandom, GeneratorIntegers) {
  const int64_t b = ((INT64_MAX / 99092) / 2);  // V4.1's bound, 46539438283891
  EXPECT_EQ(b, 46539438283891);
  // np.random.default_rng(10007 * L).integers(0, B, 4)
  EXPECT_EQ(numpy_default_rng_integers(10007, 0, b, 4),
            (std::vector<int64_t>{38316048023122, 2419938046656, 17979836159674, 36993668729195}));
  EXPECT_EQ(numpy_default_rng_integers(10007 * 14, 0, b, 4),
            (std::vector<int64_t>{33858405369630, 25755403400457, 15460673601360, 41309613242795}));
  EXPECT_EQ(numpy_default_rng_integers(0, 0, b, 4),
            (std::vector<int64_t>{29643839136299, 12555722115027, 1906884788502, 769186873658}));
  // The 32-bit Lemire path: np.random.default_rng(0).integers(0, 1000, 5)
  EXPECT_EQ(numpy_default_rng_integers(0, 0, 1000, 5), (std::vector<int64_t>{850, 636, 511, 269, 307}));
}

EngramConfig released_engram() {
  EngramConfig e;
  e.layer_ids = {1, 14};
  e.num_embeddings = {384006168, 384016682};
  e.max_ngram_size = 4;
  e.vocab_size = 16000000;
  e.n_heads = 8;
  e.head_dim = 256;
  e.pad_token_id = 2;
  e.compressed_vocab_size = 99092;
  return e;
}

TEST(EngramHash, ReleasedConstantsMatchTheConfig) {
  // The successive primes from 16,000,000 sum to the released engram_num_embeddings per layer.
  const Result<std::vector<EngramHashLayer>> h = engram_hash_layers(released_engram(), "config.json");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ(h->size(), 2u);
  const EngramHashLayer& l1 = (*h)[0];
  EXPECT_EQ(l1.multipliers,
            (std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  ASSERT_EQ(l1.primes.size(), 24u);
  EXPECT_EQ(l1.primes[0], 16000057);
  EXPECT_EQ(l1.primes[1], 16000079);
  EXPECT_EQ(l1.offsets[1], 16000057);
  EXPECT_EQ((*h)[1].primes.back(), 16000889);
  EXPECT_EQ((*h)[1].multipliers,
            (std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
  // A wrong row count names the key.
  EngramConfig bad = released_engram();
  bad.num_embeddings[1] += 1;
  const auto r = engram_hash_layers(bad, "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("text_config.engram_num_embeddings: element 1"), std::string::npos);
}

TEST(EngramHash, RowsMatchNumpy) {
  const std::vector<EngramHashLayer> h = *engram_hash_layers(released_engram(), "config.json");
  // NumPy: P = ids * M (int64), R_n = P_0 ^ .. ^ P_n, row = R_n % prime + offset (layer 14).
  const int64_t ids14[4] = {99091, 5, 2, 77777};
  int64_t rows[24];
  engram_rows(h[1], 8, ids14, rows);
  EXPECT_EQ(std::vector<int64_t>(rows, rows + 24),
            (std::vector<int64_t>{6795459,   20749941,  41214806,  48384730,  69228303,  91543400,
                                  97870046,  126509633, 142731587, 154092892, 162777643, 191161677,
                                  201106562, 208417460, 226343142, 253469512, 261544610, 287198301,
                                  298791179, 313044663, 323366413, 348542081, 364253529, 378949043}));
  const int64_t ids1[4] = {99091, 99090, 99089, 99088};
  engram_rows(h[0], 8, ids1, rows);
  EXPECT_EQ(rows[0], 14791388);
  EXPECT_EQ(rows[1], 31792932);
  EXPECT_EQ(rows[2], 46485106);
  EXPECT_EQ(rows[23], 368809011);
  for (int64_t r : rows) EXPECT_LT(r, h[0].rows);
}

}  // namespace
}  // namespace ds
