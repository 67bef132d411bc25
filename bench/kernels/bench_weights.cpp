#include "bench_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ds::bench {

void fill_signed_unit(float* x, int64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) x[i] = rng.next_signed_unit();
}

namespace {

// 8 bytes of random bits per draw; format-specific masks keep the values finite.
void fill_f32(uint8_t* dst, int64_t n, SplitMix64& rng) {
  auto* f = reinterpret_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) f[i] = rng.next_signed_unit();
}

void fill_bf16(uint8_t* dst, int64_t n, SplitMix64& rng) {
  auto* h = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i += 4) {
    uint64_t r = rng.next();
    for (int64_t j = i; j < std::min(n, i + 4); ++j, r >>= 16) {
      // sign | exponent 120..127 (|v| in [2^-7, 2)) | 7 random mantissa bits
      const uint16_t bits = static_cast<uint16_t>(r);
      h[j] = static_cast<uint16_t>((bits & 0x8000u) | ((120u + ((bits >> 7) & 7u)) << 7) | (bits & 0x7fu));
    }
  }
}

void fill_fp8(uint8_t* dst, int64_t n, SplitMix64& rng) {
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t r = rng.next();
    for (int64_t j = i; j < std::min(n, i + 8); ++j, r >>= 8) {
      uint8_t b = static_cast<uint8_t>(r);
      if ((b & 0x7fu) == 0x7fu) b ^= 1u;  // 0x7f / 0xff are NaN in E4M3FN
      dst[j] = b;
    }
  }
}

// Bytes of codes for n elements (fp4: two per byte).
int64_t code_bytes(WeightFormat f, int64_t n) {
  switch (f) {
    case WeightFormat::f32:
      return 4 * n;
    case WeightFormat::bf16:
      return 2 * n;
    case WeightFormat::fp8_e4m3_block:
      return n;
    case WeightFormat::fp4_e2m1_block:
      return (n + 1) / 2;
  }
  return n;
}

}  // namespace

WeightSet::WeightSet(WeightFormat format, int64_t rows, int64_t cols, int n_copies, uint64_t seed,
                     bool fp8_pow2_scales) {
  SplitMix64 rng(seed);
  const int64_t n = rows * cols;
  for (int c = 0; c < std::max(1, n_copies); ++c) {
    WeightMatrix w;
    w.format = format;
    w.rows = rows;
    w.cols = cols;
    if (format == WeightFormat::fp4_e2m1_block) {
      w.block_rows = 1;
      w.block_cols = 32;
    }
    AlignedBuffer<uint8_t> data(static_cast<size_t>(code_bytes(format, n)));
    switch (format) {
      case WeightFormat::f32:
        fill_f32(data.data(), n, rng);
        break;
      case WeightFormat::bf16:
        fill_bf16(data.data(), n, rng);
        break;
      case WeightFormat::fp8_e4m3_block:
        fill_fp8(data.data(), n, rng);
        break;
      case WeightFormat::fp4_e2m1_block:
        fill_fp8(data.data(), (n + 1) / 2, rng);  // any byte is a valid pair of FP4 codes
        break;
    }
    w.data = data.data();
    if (format == WeightFormat::fp8_e4m3_block) {
      AlignedBuffer<float> scales(static_cast<size_t>(w.scale_rows() * w.scale_cols()));
      for (size_t i = 0; i < scales.size(); ++i) {
        scales[i] = fp8_pow2_scales ? std::ldexp(1.0f, -11 + static_cast<int>(rng.next() & 3u))
                                    : 1e-3f * (1.5f + rng.next_signed_unit());
      }
      w.scales = scales.data();
      scales_.push_back(std::move(scales));
    }
    if (format == WeightFormat::fp4_e2m1_block) {
      // E8M0 bytes 2^-8 .. 2^-5: finite weights of the size real experts have.
      AlignedBuffer<uint8_t> scales(static_cast<size_t>(w.scale_rows() * w.scale_cols()));
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(119 + (rng.next() & 3u));
      w.scales_e8m0 = scales.data();
      scales_e8m0_.push_back(std::move(scales));
    }
    data_.push_back(std::move(data));
    matrices_.push_back(w);
  }
}

int copies_for_bytes(const WeightMatrix& w, int64_t min_total_bytes) {
  const int64_t b = std::max<int64_t>(1, w.stored_bytes());
  return static_cast<int>(std::max<int64_t>(1, (min_total_bytes + b - 1) / b));
}

}  // namespace ds::bench
