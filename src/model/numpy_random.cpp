#include "model/numpy_random.h"

#include <cstddef>
#include <cstdint>

namespace ds {

namespace {

// numpy/random/bit_generator.pyx
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

// numpy/random/src/pcg64: PCG_DEFAULT_MULTIPLIER_128
constexpr unsigned __int128 kPcgMult =
    (static_cast<unsigned __int128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

}  // namespace

SeedSequence::SeedSequence(uint64_t entropy) {
  // _coerce_to_uint32_array: an int becomes its little-endian 32-bit words (0 -> [0]).
  std::vector<uint32_t> words;
  do {
    words.push_back(static_cast<uint32_t>(entropy));
    entropy >>= 32;
  } while (entropy != 0);
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool_[i] =
        hashmix(i < static_cast<int>(words.size()) ? words[static_cast<std::size_t>(i)] : 0u, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
    }
  }
  for (std::size_t src = kPoolSize; src < words.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) pool_[dst] = mix(pool_[dst], hashmix(words[src], hash_const));
  }
}

std::vector<uint32_t> SeedSequence::generate_state32(int n_words) const {
  std::vector<uint32_t> out(static_cast<std::size_t>(n_words));
  uint32_t hash_const = kInitB;
  for (int i = 0; i < n_words; ++i) {
    uint32_t v = pool_[i % kPoolSize];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

std::vector<uint64_t> SeedSequence::generate_state64(int n_words) const {
  const std::vector<uint32_t> w = generate_state32(2 * n_words);
  std::vector<uint64_t> out(static_cast<std::size_t>(n_words));
  for (int i = 0; i < n_words; ++i)
    out[static_cast<std::size_t>(i)] = w[2 * i] | (uint64_t{w[2 * i + 1]} << 32);
  return out;
}

Pcg64::Pcg64(const SeedSequence& seed) {
  // pcg64_set_seed: state from words (0, 1), increment from words (2, 3), the first one high.
  const std::vector<uint64_t> v = seed.generate_state64(4);
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(v[0]) << 64) | v[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(v[2]) << 64) | v[3];
  state_ = 0;
  inc_ = (init_seq << 1) | 1;
  state_ = state_ * kPcgMult + inc_;
  state_ += init_state;
  state_ = state_ * kPcgMult + inc_;
}

uint64_t Pcg64::next64() {
  state_ = state_ * kPcgMult + inc_;
  const uint64_t folded = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (folded >> rot) | (folded << ((64 - rot) & 63));
}

uint32_t Pcg64::next32() {
  if (has32_) {
    has32_ = false;
    return held32_;
  }
  const uint64_t v = next64();
  has32_ = true;
  held32_ = static_cast<uint32_t>(v >> 32);
  return static_cast<uint32_t>(v);
}

std::vector<int64_t> numpy_default_rng_integers(uint64_t seed, int64_t low, int64_t high, int n) {
  Pcg64 g{SeedSequence(seed)};
  // Generator.integers: high exclusive, so the inclusive range is high - low - 1.
  const uint64_t rng = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) - 1;
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    uint64_t v = 0;
    if (rng == 0) {
      v = 0;
    } else if (rng == 0xFFFFFFFFULL) {  // the whole 32-bit range: no rejection
      v = g.next32();
    } else if (rng == UINT64_MAX) {
      v = g.next64();
    } else if (rng < 0xFFFFFFFFULL) {  // buffered_bounded_lemire_uint32
      const uint32_t excl = static_cast<uint32_t>(rng) + 1;
      uint64_t m = uint64_t{g.next32()} * excl;
      if (static_cast<uint32_t>(m) < excl) {
        const uint32_t threshold = (UINT32_MAX - static_cast<uint32_t>(rng)) % excl;
        while (static_cast<uint32_t>(m) < threshold) m = uint64_t{g.next32()} * excl;
      }
      v = m >> 32;
    } else {  // bounded_lemire_uint64
      const uint64_t excl = rng + 1;
      unsigned __int128 m = static_cast<unsigned __int128>(g.next64()) * excl;
      if (static_cast<uint64_t>(m) < excl) {
        const uint64_t threshold = (UINT64_MAX - rng) % excl;
        while (static_cast<uint64_t>(m) < threshold) m = static_cast<unsigned __int128>(g.next64()) * excl;
      }
      v = static_cast<uint64_t>(m >> 64);
    }
    out.push_back(static_cast<int64_t>(static_cast<uint64_t>(low) + v));
  }
  return out;
}

}  // namespace ds
