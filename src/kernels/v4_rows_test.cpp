// Hadamard and quantise-dequantise simulations: every path bit-identical to the scalar reference
// (both are defined as the same f32 operations per element, see hadamard.h and quant_sim.h), the
// reference checked against independent definitions (the explicit Hadamard matrix; the grids'
// value sets), rows independent of their batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/hadamard.h"
#include "kernels/quant_sim.h"
#include "kernels/ref/v4_rows_ref.h"
#include "tensor/dtype.h"

namespace ds {

static void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

std::vector<float> random_normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

bool bits_equal(float a, float b) {
  return f32_to_bits(a) == f32_to_bits(b) || (std::isnan(a) && std::isnan(b));
}

// First index where two buffers differ bitwise (NaN matches NaN), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!bits_equal(a[i], b[i])) return static_cast<int64_t>(i);
  return -1;
}

class V4RowsTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
  }
};

// The reference butterfly equals the Sylvester matrix product scale · H · x (in f64, where the
// f32 butterfly's rounding is within log2(n) · 2^-24 relative of Σ|x|).
TEST(Hadamard, ReferenceIsTheSylvesterMatrix) {
  for (int64_t n : {1, 2, 8, 16, 128}) {
    std::vector<float> x = random_normal(static_cast<size_t>(n), 3);
    std::vector<float> y = x;
    const float scale = hadamard_default_scale(n);
    ref::hadamard_rows(y.data(), 1, n, n, scale);
    double abs_sum = 0.0;
    for (float v : x) abs_sum += std::fabs(v);
    for (int64_t i = 0; i < n; ++i) {
      double want = 0.0;
      for (int64_t j = 0; j < n; ++j) want += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x[j];
      want *= scale;
      const double tol = (std::log2(static_cast<double>(n)) + 2) * 0x1p-24 * abs_sum * scale + 1e-30;
      EXPECT_NEAR(y[i], want, tol) << "n=" << n << " i=" << i;
    }
  }
  // The orthonormal transform is its own inverse: H(H(x)) ≈ x.
  std::vector<float> x = random_normal(128, 4);
  std::vector<float> y = x;
  ref::hadamard_rows(y.data(), 1, 128, 128, hadamard_default_scale(128));
  ref::hadamard_rows(y.data(), 1, 128, 128, hadamard_default_scale(128));
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f) << i;
}

TEST_P(V4RowsTest, HadamardBitIdenticalToReference) {
  const Isa isa = GetParam();
  uint32_t seed = 10;
  for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024}) {
    for (int64_t n_rows : {1, 3, 17}) {
      const int64_t ld = n + 5;  // strided rows; the gap must stay untouched
      std::vector<float> x = random_normal(static_cast<size_t>(n_rows * ld), ++seed);
      x[0] = n > 1 ? INFINITY : x[0];  // Inf and NaN flow through the butterflies identically
      if (n_rows > 1) x[ld + n - 1] = NAN;
      std::vector<float> y_ref = x;
      ref::hadamard_rows(y_ref.data(), n_rows, n, ld, hadamard_default_scale(n));
      std::vector<float> y = x;
      hadamard_rows(isa, y.data(), n_rows, n, ld, hadamard_default_scale(n));
      const int64_t at = first_difference(y, y_ref);
      EXPECT_EQ(at, -1) << isa_name(isa) << " n=" << n << " rows=" << n_rows << ": element " << at << " = "
                        << (at >= 0 ? y[at] : 0) << " vs reference " << (at >= 0 ? y_ref[at] : 0);
    }
  }
}

TEST_P(V4RowsTest, HadamardRowAloneEqualsRowInBatch) {
  const Isa isa = GetParam();
  const int64_t n = 128, n_rows = 9;
  const std::vector<float> x = random_normal(static_cast<size_t>(n_rows * n), 20);
  std::vector<float> batch = x;
  hadamard_rows(isa, batch.data(), n_rows, n, n, 0.0883883476f);
  for (int64_t r = 0; r < n_rows; ++r) {
    std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
    hadamard_rows(isa, row.data(), 1, n, n, 0.0883883476f);
    EXPECT_EQ(std::memcmp(row.data(), batch.data() + r * n, n * sizeof(float)), 0) << "row " << r;
  }
}

// ---- quantise-dequantise ----

std::string spec_name(const QuantSimSpec& s) {
  return std::string(s.grid == QuantGrid::fp8_e4m3 ? "fp8" : "fp4") + "/" +
         (s.scale_rule == QuantScaleRule::pow2 ? "pow2" : "e4m3") + "/block" + std::to_string(s.block);
}

std::vector<QuantSimSpec> all_specs() {
  std::vector<QuantSimSpec> specs = {v4_kv_fp8_spec(), v4_indexer_fp4_spec(), v41_window_fp8_spec(),
                                     v41_compressed_fp4_spec(), v41_indexer_fp4_spec()};
  specs.push_back({QuantGrid::fp8_e4m3, QuantScaleRule::pow2, 128, 1e-4f});  // GEMM activations
  specs.push_back({QuantGrid::fp4_e2m1, QuantScaleRule::pow2, 8, 6.0f * 0x1p-126f});
  return specs;
}

// Rows whose blocks span many magnitudes: each block gets its own random scale 2^[-30, 30]; some
// blocks are all zero, some hold a single nonzero, some tiny values near the floors.
std::vector<float> quant_inputs(int64_t n_rows, int64_t n, int32_t block, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp_dist(-30, 30);
  std::uniform_int_distribution<int> kind(0, 9);
  std::vector<float> x(static_cast<size_t>(n_rows * n));
  for (int64_t b0 = 0; b0 < n_rows * n; b0 += block) {
    const int k = kind(rng);
    const float mag = std::ldexp(1.0f, k == 0 ? -130 : exp_dist(rng));
    const int64_t b1 = std::min<int64_t>(n_rows * n, b0 + block);
    for (int64_t i = b0; i < b1; ++i) x[i] = k == 1 ? 0.0f : normal(rng) * mag;
    if (k == 2) {
      for (int64_t i = b0 + 1; i < b1; ++i) x[i] = 0.0f;
    }
  }
  return x;
}

TEST(QuantSim, ReferenceLandsOnTheGridAndRespectsTheScale) {
  for (const QuantSimSpec& spec : all_specs()) {
    const int64_t n = spec.block * 8;
    const std::vector<float> x = quant_inputs(4, n, spec.block, 30);
    std::vector<float> y = x;
    ref::quant_sim_rows(y.data(), 4, n, n, spec);
    const float grid_max = spec.grid == QuantGrid::fp8_e4m3 ? 448.0f : 6.0f;
    for (int64_t b0 = 0; b0 < 4 * n; b0 += spec.block) {
      float amax = 0.0f;
      for (int32_t i = 0; i < spec.block; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
      const float s = quant_sim_block_scale(spec, amax);
      ASSERT_GT(s, 0.0f) << spec_name(spec);
      // The scale covers the block: amax / s <= grid_max (pow2: the smallest such power of two;
      // e4m3: up to the scale's own rounding, 2^-4 relative where it is a normal E4M3 number, and
      // not at all once amax / max passes E4M3's 448, where the scale saturates and x clamps).
      const float a = std::max(amax, spec.amax_floor);
      if (spec.scale_rule == QuantScaleRule::e4m3) {
        if (a / grid_max >= 0x1p-6f && a / grid_max <= 448.0f) {
          EXPECT_LE(a / s, grid_max * (1.0f + 0x1p-4f)) << spec_name(spec);
        }
      } else {
        EXPECT_LE(a / s, grid_max) << spec_name(spec);
        EXPECT_EQ(f32_to_bits(s) & 0x7fffffu, 0u) << "scale is a power of two";
        EXPECT_GT(std::max(amax, spec.amax_floor) * (1.0f / grid_max), s / 2) << spec_name(spec);
      }
      for (int32_t i = 0; i < spec.block; ++i) {
        const float q = y[b0 + i] / s;
        EXPECT_EQ(ref::quant_grid_round(spec.grid, q), q)
            << spec_name(spec) << ": " << y[b0 + i] << " off the grid";
        // Nearest grid value: the error is at most half a quantum of |q|'s binade.
        const float xq = std::min(grid_max, std::max(-grid_max, x[b0 + i] / s));
        const float quantum = spec.grid == QuantGrid::fp8_e4m3
                                  ? std::ldexp(1.0f, std::max(std::ilogb(std::fabs(xq)), -6) - 3)
                                  : std::ldexp(1.0f, std::max(std::ilogb(std::fabs(xq)), 0) - 1);
        if (xq != 0.0f) {
          EXPECT_LE(std::fabs(q - xq), quantum / 2) << spec_name(spec) << " x=" << x[b0 + i];
        }
      }
    }
  }
}

TEST(QuantSim, RoundsTiesToEvenAndSaturates) {
  // fp4 ties: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4; saturation at 6.
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -5.0f, 5.01f, 7.0f, -100.0f, -0.0f};
  const float want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, -4.0f, 6.0f, 6.0f, -6.0f, -0.0f};
  for (size_t i = 0; i < std::size(in); ++i) {
    const float q = std::min(6.0f, std::max(-6.0f, in[i]));
    EXPECT_TRUE(bits_equal(ref::quant_grid_round(QuantGrid::fp4_e2m1, q), want[i])) << in[i];
  }
  // A block whose amax is 6 has scale 1 under pow2 (6 · f32(1/6) rounds to exactly 1.0).
  const QuantSimSpec fp4 = {QuantGrid::fp4_e2m1, QuantScaleRule::pow2, 8, 6.0f * 0x1p-126f};
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    std::vector<float> x = {6.0f, 0.25f, 0.75f, 2.5f, 3.5f, 5.0f, -1.25f, 1.75f};
    quant_sim_rows(isa, x.data(), 1, 8, 8, fp4);
    const std::vector<float> expect = {6.0f, 0.0f, 1.0f, 2.0f, 4.0f, 4.0f, -1.0f, 2.0f};
    EXPECT_EQ(x, expect) << isa_name(isa);
  }
}

TEST_P(V4RowsTest, QuantSimBitIdenticalToReference) {
  const Isa isa = GetParam();
  uint32_t seed = 40;
  for (const QuantSimSpec& spec : all_specs()) {
    for (int64_t n_blocks : {1, 2, 7, 16}) {
      const int64_t n = n_blocks * spec.block;
      const int64_t n_rows = 5, ld = n + 3;
      std::vector<float> x = quant_inputs(n_rows, ld, 1, ++seed);
      // Re-draw per block so block magnitudes vary within rows.
      const std::vector<float> blocks = quant_inputs(1, n_rows * ld, spec.block, ++seed);
      for (size_t i = 0; i < x.size(); ++i) x[i] = blocks[i];
      x[2 * ld + 1] = NAN;            // row 2, block 0 -> all NaN
      x[3 * ld + n - 1] = -INFINITY;  // row 3, last block -> all NaN
      std::vector<float> y_ref = x;
      ref::quant_sim_rows(y_ref.data(), n_rows, n, ld, spec);
      std::vector<float> y = x;
      quant_sim_rows(isa, y.data(), n_rows, n, ld, spec);
      const int64_t at = first_difference(y, y_ref);
      EXPECT_EQ(at, -1) << isa_name(isa) << " " << spec_name(spec) << " n=" << n << ": element " << at
                        << " = " << (at >= 0 ? y[at] : 0) << " vs reference " << (at >= 0 ? y_ref[at] : 0)
                        << " (x " << (at >= 0 ? x[at] : 0) << ")";
      for (int32_t i = 0; i < spec.block; ++i) EXPECT_TRUE(std::isnan(y[2 * ld + i])) << "NaN block";
      EXPECT_TRUE(std::isnan(y[3 * ld + n - spec.block])) << "Inf block";
      EXPECT_EQ(y[ld + n], x[ld + n]) << "the row gap is untouched";
    }
  }
}

TEST_P(V4RowsTest, QuantSimRowAloneEqualsRowInBatch) {
  const Isa isa = GetParam();
  const QuantSimSpec spec = v4_kv_fp8_spec();
  const int64_t n = 448, n_rows = 6;
  const std::vector<float> x = quant_inputs(n_rows, n, 64, 50);
  std::vector<float> batch = x;
  quant_sim_rows(isa, batch.data(), n_rows, n, n, spec);
  for (int64_t r = 0; r < n_rows; ++r) {
    std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
    quant_sim_rows(isa, row.data(), 1, n, n, spec);
    EXPECT_EQ(std::memcmp(row.data(), batch.data() + r * n, n * sizeof(float)), 0) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, V4RowsTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) {
                           return std::string(isa_name(p.param));
                         });

}  // namespace
}  // namespace ds
