// NumPy's default_rng reproduced bit for bit (numpy/random: SeedSequence, PCG64, Generator.integers),
// so that constants a released model drew with NumPy can be recomputed at load instead of shipped
// (V4.1 Engram's hash multipliers, model-spec §5.7: default_rng(10007·layer).integers(0, B, 4)).
// Tested against numbers NumPy 1.24 printed (model/numpy_random_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace ds {

// numpy.random.SeedSequence(entropy) with no spawn key and the default pool of 4 words.
class SeedSequence {
 public:
  explicit SeedSequence(uint64_t entropy);
  // generate_state(n_words, np.uint32)
  std::vector<uint32_t> generate_state32(int n_words) const;
  // generate_state(n_words, np.uint64): pairs of 32-bit words, the first one low
  std::vector<uint64_t> generate_state64(int n_words) const;

 private:
  uint32_t pool_[4] = {};
};

// numpy.random.PCG64 (128-bit LCG, XSL-RR output) seeded from a SeedSequence as NumPy does.
class Pcg64 {
 public:
  explicit Pcg64(const SeedSequence& seed);
  uint64_t next64();  // random_raw()
  uint32_t next32();  // the low half of a 64-bit draw, then its high half

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has32_ = false;
  uint32_t held32_ = 0;
};

// numpy.random.default_rng(seed).integers(low, high, n) with dtype int64 (high exclusive, low < high):
// Lemire's bounded method, 32- or 64-bit by the range, as Generator does.
std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t low, int64_t high, int n);

}  // namespace ds
