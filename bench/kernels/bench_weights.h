// Deterministic random weights and activations for the kernel benches (fixed seed, no files).
// Values are drawn so every format decodes to finite numbers of moderate size; the benches
// measure speed, the kernels' tests own correctness.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_buffer.h"
#include "tensor/weight_matrix.h"

namespace ds::bench {

// SplitMix64: tiny, seedable, good enough to fill benchmark buffers.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float next_signed_unit() {
    return static_cast<float>(static_cast<int64_t>(next() >> 40) - (1 << 23)) * 0x1p-23f;
  }

 private:
  uint64_t state_;
};

// Fills x with uniform values in [-1, 1).
void fill_signed_unit(float* x, int64_t n, uint64_t seed);

// n_copies independent matrices [rows, cols] in `format` (fp8 with 128 x 128 f32 block scales, fp4
// with E8M0 scales per 1 x 32; cols must then be a multiple of 32),
// owned here; matrices()[i] views copy i. Cycling through copies whose total exceeds the L3
// makes every call stream its weights from DRAM, as in decode.
class WeightSet {
 public:
  // fp8_pow2_scales: fp8 block scales that are powers of two (2^-11 .. 2^-8, V4's E8M0 scales),
  // else any f32 around 1.5e-3 (V3's weight_scale_inv).
  WeightSet(WeightFormat format, int64_t rows, int64_t cols, int n_copies, uint64_t seed,
            bool fp8_pow2_scales = false);

  const std::vector<WeightMatrix>& matrices() const { return matrices_; }
  int64_t bytes_per_matrix() const { return matrices_.empty() ? 0 : matrices_[0].stored_bytes(); }

 private:
  std::vector<AlignedBuffer<uint8_t>> data_;
  std::vector<AlignedBuffer<float>> scales_;
  std::vector<AlignedBuffer<uint8_t>> scales_e8m0_;
  std::vector<WeightMatrix> matrices_;
};

// Copies needed so that the set is at least `min_total_bytes` (at least 1).
int copies_for_bytes(const WeightMatrix& shape_and_format, int64_t min_total_bytes);

}  // namespace ds::bench
