// Random weight matrices of every format for the matmul tests (matmul_test.cpp,
// matmul_bf16x_test.cpp): the bytes a WeightMatrix points at, owned together with it.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/weight_matrix.h"

namespace ds::testing_weights {

// Owns the bytes behind a WeightMatrix filled with random data.
struct TestWeights {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> fp8;
  std::vector<float> scales;
  std::vector<uint8_t> scales_e8m0;
  WeightMatrix w;
};

// f32/bf16: standard normal. fp8: uniformly random codes except the NaN codes 0x7f/0xff (the vector
// paths decode those as finite numbers, see matmul.h), so zeros and subnormals occur; block scales
// log-uniform in [2^-10, 2^2].
inline TestWeights make_weights(WeightFormat format, int64_t rows, int64_t cols, uint32_t seed,
                                int32_t block_rows = 128, int32_t block_cols = 128) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  TestWeights t;
  t.w.format = format;
  t.w.rows = rows;
  t.w.cols = cols;
  t.w.block_rows = block_rows;
  t.w.block_cols = block_cols;
  const size_t n = static_cast<size_t>(rows * cols);
  switch (format) {
    case WeightFormat::f32:
      t.f32.resize(n);
      for (auto& v : t.f32) v = normal(rng);
      t.w.data = t.f32.data();
      break;
    case WeightFormat::bf16:
      t.bf16.resize(n);
      for (auto& v : t.bf16) v = f32_to_bf16(normal(rng));
      t.w.data = t.bf16.data();
      break;
    case WeightFormat::fp8_e4m3_block: {
      t.fp8.resize(n);
      std::uniform_int_distribution<int> code(0, 253);
      for (auto& v : t.fp8) {
        const int c = code(rng);  // 0..253 -> skip 0x7f and 0xff
        v = static_cast<uint8_t>(c < 0x7f ? c : c + 1);
      }
      t.scales.resize(static_cast<size_t>(t.w.scale_rows() * t.w.scale_cols()));
      std::uniform_real_distribution<float> log2_scale(-10.0f, 2.0f);
      for (auto& s : t.scales) s = std::exp2(log2_scale(rng));
      t.w.data = t.fp8.data();
      t.w.scales = t.scales.data();
      break;
    }
    case WeightFormat::fp4_e2m1_block: {
      // Every byte is two valid codes (±0 included); scales 2^-10 .. 2^2 as E8M0 bytes. The block
      // is fixed at 1 x 32 by the format.
      t.w.block_rows = 1;
      t.w.block_cols = 32;
      t.fp8.resize(n / 2);
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& v : t.fp8) v = static_cast<uint8_t>(byte(rng));
      t.scales_e8m0.resize(static_cast<size_t>(t.w.scale_rows() * t.w.scale_cols()));
      std::uniform_int_distribution<int> exponent(127 - 10, 127 + 2);
      for (auto& s : t.scales_e8m0) s = static_cast<uint8_t>(exponent(rng));
      t.w.data = t.fp8.data();
      t.w.scales_e8m0 = t.scales_e8m0.data();
      break;
    }
  }
  return t;
}

inline std::vector<float> random_normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

}  // namespace ds::testing_weights
