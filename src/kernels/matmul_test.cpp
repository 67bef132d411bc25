// matmul: every ISA path against the scalar reference (shape sweep), batch invariance (bitwise),
// the documented lane order (bitwise, via a scalar model), NaN/Inf propagation, plans.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/matmul_test_weights.h"
#include "kernels/ref/matmul_ref.h"
#include "tensor/dtype.h"

namespace ds {

// Readable parameter names in gtest messages (found by ADL, so in namespace ds).
static void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

using testing_weights::make_weights;
using testing_weights::random_normal;
using testing_weights::TestWeights;

constexpr WeightFormat kAllFormats[] = {WeightFormat::f32, WeightFormat::bf16, WeightFormat::fp8_e4m3_block};

const char* format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::f32:
      return "f32";
    case WeightFormat::bf16:
      return "bf16";
    case WeightFormat::fp8_e4m3_block:
      return "fp8_e4m3_block";
    case WeightFormat::fp4_e2m1_block:
      return "fp4_e2m1_block";
  }
  return "?";
}

std::vector<float> run_matmul(Isa isa, ThreadPool& pool, const std::vector<float>& x, int64_t m,
                              const WeightMatrix& w) {
  std::vector<float> y(static_cast<size_t>(m * w.rows), -12345.0f);
  matmul(isa, pool, MatmulArgs{x.data(), m, w.cols, &w, y.data(), w.rows});
  return y;
}

std::vector<float> run_reference(const std::vector<float>& x, int64_t m, const WeightMatrix& w) {
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  matmul_cols_ref(MatmulArgs{x.data(), m, w.cols, &w, y.data(), w.rows}, 0, w.rows);
  return y;
}

bool bit_equal(float a, float b) { return f32_to_bits(a) == f32_to_bits(b); }

// Tolerance: both results are f32 dot products of the same exactly dequantised terms, summed in
// different orders. The reference's sequential sum is within γ_cols · Σ|x·W| of the exact value
// (γ_n ≈ n·2^-24), the lane-split FMA sum within a smaller bound of the same form, so their
// difference is at most c · cols · 2^-24 · Σ_k |x_k W_nk| with c = 2 (plus c · cols · 2^-149 for
// results in the subnormal range, where rounding errors are absolute).
constexpr double kTolC = 2.0;

// Compares y against the reference; on failure reports the worst coordinate.
void expect_close(const std::vector<float>& y, const std::vector<float>& y_ref, const std::vector<float>& x,
                  int64_t m, const WeightMatrix& w, const std::string& what) {
  std::vector<double> w_abs(static_cast<size_t>(w.rows * w.cols));  // |W| dequantised once
  for (int64_t n = 0; n < w.rows; ++n)
    for (int64_t k = 0; k < w.cols; ++k) w_abs[n * w.cols + k] = std::fabs(weight_at_ref(w, n, k));
  double worst_excess = 0.0;
  int64_t worst_i = -1, worst_n = -1;
  double worst_err = 0.0, worst_bound = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      double abs_sum = 0.0;
      for (int64_t k = 0; k < w.cols; ++k)
        abs_sum += std::fabs(double{x[i * w.cols + k]}) * w_abs[n * w.cols + k];
      // + one subnormal quantum per operation: products of subnormal weights (fp4 scale 2^-127)
      // round absolutely, not relatively.
      const double bound = kTolC * static_cast<double>(w.cols) * (0x1p-24 * abs_sum + 0x1p-149);
      const double err = std::fabs(double{y[i * w.rows + n]} - y_ref[i * w.rows + n]);
      const double excess = std::isnan(err) ? INFINITY : err - bound;
      if (excess > 0.0 && excess > worst_excess) {
        worst_excess = excess;
        worst_i = i;
        worst_n = n;
        worst_err = err;
        worst_bound = bound;
      }
    }
  }
  EXPECT_EQ(worst_i, -1) << what << ": worst at y[" << worst_i << ", " << worst_n
                         << "] = " << (worst_i >= 0 ? y[worst_i * w.rows + worst_n] : 0.0f)
                         << " vs reference " << (worst_i >= 0 ? y_ref[worst_i * w.rows + worst_n] : 0.0f)
                         << ", |err| " << worst_err << " > bound " << worst_bound;
}

std::string describe(Isa isa, WeightFormat f, int64_t m, int64_t rows, int64_t cols) {
  return std::string(isa_name(isa)) + " " + format_name(f) + " m=" + std::to_string(m) +
         " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
}

class MatmulIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) {
      GTEST_SKIP() << "CPU lacks " << isa_name(GetParam()) << "; path not tested on this machine";
    }
  }
};

TEST_P(MatmulIsaTest, ShapeSweepMatchesReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (WeightFormat f : kAllFormats) {
    for (int64_t rows : {1, 15, 16, 17, 64, 130, 300}) {
      for (int64_t cols : {16, 24, 48, 128, 144, 256, 1040}) {
        const TestWeights t = make_weights(f, rows, cols, ++seed);
        for (int64_t m : {0, 1, 2, 3, 5, 7, 16, 33}) {
          const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), ++seed);
          const std::vector<float> y = run_matmul(isa, pool, x, m, t.w);
          expect_close(y, run_reference(x, m, t.w), x, m, t.w, describe(isa, f, m, rows, cols));
        }
      }
    }
  }
}

// Odd fp8 block shapes: blocks narrower than a vector, not multiples of it, partial edge blocks.
TEST_P(MatmulIsaTest, Fp8OddBlockShapesMatchReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 100;
  const int32_t block_shapes[][2] = {{1, 1}, {3, 7}, {5, 24}, {16, 40}, {2, 32}, {128, 128}, {7, 200}};
  for (const auto& bs : block_shapes) {
    for (int64_t cols : {16, 40, 100, 1040}) {
      const TestWeights t = make_weights(WeightFormat::fp8_e4m3_block, 37, cols, ++seed, bs[0], bs[1]);
      for (int64_t m : {1, 5, 8}) {
        const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), ++seed);
        expect_close(run_matmul(isa, pool, x, m, t.w), run_reference(x, m, t.w), x, m, t.w,
                     describe(isa, t.w.format, m, 37, cols) + " block " + std::to_string(bs[0]) + "x" +
                         std::to_string(bs[1]));
      }
    }
  }
}

TEST_P(MatmulIsaTest, ZeroRowsLeavesOutputUntouched) {
  const TestWeights t = make_weights(WeightFormat::bf16, 8, 32, 7);
  ThreadPool pool(2);
  float y[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float x[32] = {};
  matmul(GetParam(), pool, MatmulArgs{x, 0, 32, &t.w, y, 8});
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[3], 4.0f);
}

// y[i, n] must not depend on m, on the row's position, on the pool size or on the n-range split.
TEST_P(MatmulIsaTest, BatchInvariantBitwise) {
  const Isa isa = GetParam();
  constexpr int64_t kM = 37;
  for (WeightFormat f : kAllFormats) {
    for (int64_t cols : {40, 1000}) {
      const int64_t rows = 67;
      // fp8 blocks: 24 columns (straddles 16-lane chunks) or 32 (whole chunks, partial last block).
      const TestWeights t = make_weights(f, rows, cols, 11, 5, cols == 40 ? 24 : 32);
      const std::vector<float> x = random_normal(static_cast<size_t>(kM * cols), 12);
      // The same rows in reverse order: row i of x sits at position kM-1-i.
      std::vector<float> x_rev(x.size());
      for (int64_t i = 0; i < kM; ++i) {
        std::memcpy(&x_rev[(kM - 1 - i) * cols], &x[i * cols], cols * sizeof(float));
      }
      for (int n_threads : {1, 2, 3}) {
        ThreadPool pool(n_threads);
        const std::vector<float> y = run_matmul(isa, pool, x, kM, t.w);
        const std::vector<float> y_rev = run_matmul(isa, pool, x_rev, kM, t.w);
        for (int64_t i = 0; i < kM; ++i) {
          const std::vector<float> x_row(x.begin() + i * cols, x.begin() + (i + 1) * cols);
          const std::vector<float> y_row = run_matmul(isa, pool, x_row, 1, t.w);
          for (int64_t n = 0; n < rows; ++n) {
            ASSERT_TRUE(bit_equal(y_row[n], y[i * rows + n]))
                << describe(isa, f, kM, rows, cols) << " threads=" << n_threads << ": m=1 row " << i
                << " differs at n=" << n << ": " << y_row[n] << " vs " << y[i * rows + n];
            ASSERT_TRUE(bit_equal(y_rev[(kM - 1 - i) * rows + n], y[i * rows + n]))
                << describe(isa, f, kM, rows, cols) << " threads=" << n_threads << ": row " << i
                << " moved to " << kM - 1 - i << " differs at n=" << n;
          }
        }
      }
      // Uneven single-threaded column ranges give the same bits as well.
      std::vector<float> y_split(static_cast<size_t>(kM * rows));
      const MatmulArgs args{x.data(), kM, cols, &t.w, y_split.data(), rows};
      for (int64_t n0 : {0, 13, 14, 51}) {
        const int64_t n1 = n0 == 0 ? 13 : n0 == 13 ? 14 : n0 == 14 ? 51 : rows;
        matmul_cols(isa, args, n0, n1);
      }
      ThreadPool pool(1);
      const std::vector<float> y = run_matmul(isa, pool, x, kM, t.w);
      for (size_t e = 0; e < y.size(); ++e) {
        ASSERT_TRUE(bit_equal(y_split[e], y[e])) << describe(isa, f, kM, rows, cols) << " split at " << e;
      }
    }
  }
}

TEST_P(MatmulIsaTest, NanAndInfPropagateToTheirRowsOnly) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  for (WeightFormat f : kAllFormats) {
    const int64_t rows = 21, cols = 50, m = 4;
    const TestWeights t = make_weights(f, rows, cols, 21);
    std::vector<float> x = random_normal(static_cast<size_t>(m * cols), 22);
    x[1 * cols + 5] = NAN;        // row 1: NaN everywhere
    x[2 * cols + 49] = INFINITY;  // row 2, in the tail chunk: ±Inf by the sign of W[n, 49]
    x[3 * cols + 7] = -INFINITY;
    const std::vector<float> y = run_matmul(isa, pool, x, m, t.w);
    const std::vector<float> y_ref = run_reference(x, m, t.w);
    for (int64_t n = 0; n < rows; ++n) {
      EXPECT_TRUE(std::isfinite(y[n])) << describe(isa, f, m, rows, cols) << " clean row 0, n=" << n;
      EXPECT_TRUE(std::isnan(y[rows + n])) << describe(isa, f, m, rows, cols) << " NaN row, n=" << n;
      for (int64_t i : {2, 3}) {
        const float got = y[i * rows + n], want = y_ref[i * rows + n];
        EXPECT_TRUE(std::isinf(want) || std::isnan(want)) << "reference row " << i << " n=" << n;
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
            << describe(isa, f, m, rows, cols) << " Inf row " << i << " n=" << n << ": " << got << " vs "
            << want;
      }
    }
  }
}

// The documented order, modelled in scalar code: `lanes` accumulators, lane l takes k ≡ l mod lanes
// in increasing k with a fused multiply-add, then the pairwise tree (l + l + half, halving).
// The vector path must match it bit for bit (which also shows the forced path really ran).
float lane_order_model(const float* x, const WeightMatrix& w, int64_t n, int lanes) {
  std::vector<float> acc(static_cast<size_t>(lanes), 0.0f);
  const int64_t padded = (w.cols + lanes - 1) / lanes * lanes;
  for (int64_t k = 0; k < padded; ++k) {
    const float xv = k < w.cols ? x[k] : 0.0f;
    const float wv = k < w.cols ? weight_at_ref(w, n, k) : 0.0f;
    acc[k % lanes] = std::fma(xv, wv, acc[k % lanes]);
  }
  for (int half = lanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) acc[l] = acc[l] + acc[l + half];
  }
  return acc[0];
}

TEST_P(MatmulIsaTest, ForcedPathFollowsItsDocumentedLaneOrder) {
  const Isa isa = GetParam();
  if (isa == Isa::reference) GTEST_SKIP() << "the reference order is the plain loop (tested by the sweep)";
  const int lanes = isa == Isa::avx512 ? 16 : 8;
  ThreadPool pool(2);
  for (WeightFormat f : kAllFormats) {
    for (int64_t cols : {8, 24, 100, 1040}) {
      // m = 20: the AVX-512 fp8 GEMM over decoded panels (cols 1040, whole-chunk blocks; 100: the tail).
      for (int64_t m : {7, 20}) {
        const int64_t rows = 9;
        // fp8 blocks of 24 columns straddle vector chunks; 32 does not (both scale walks covered).
        const TestWeights t = make_weights(f, rows, cols, 31, 4, cols == 1040 || cols == 100 ? 32 : 24);
        const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), 32);
        const std::vector<float> y = run_matmul(isa, pool, x, m, t.w);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t n = 0; n < rows; ++n) {
            const float want = lane_order_model(&x[i * cols], t.w, n, lanes);
            ASSERT_TRUE(bit_equal(y[i * rows + n], want))
                << describe(isa, f, m, rows, cols) << " y[" << i << ", " << n << "] = " << y[i * rows + n]
                << ", lane model " << want;
          }
        }
      }
    }
  }
}

// ---- FP4 E2M1 with E8M0 scales per 32 columns (V4 routed experts) ----

TEST_P(MatmulIsaTest, Fp4ShapeSweepMatchesReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 500;
  for (int64_t rows : {1, 7, 8, 9, 15, 16, 17, 64, 131}) {
    for (int64_t cols : {32, 64, 96, 160, 1024, 2048}) {
      const TestWeights t = make_weights(WeightFormat::fp4_e2m1_block, rows, cols, ++seed);
      for (int64_t m : {0, 1, 2, 3, 4, 5, 6, 7, 13, 33}) {
        const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), ++seed);
        expect_close(run_matmul(isa, pool, x, m, t.w), run_reference(x, m, t.w), x, m, t.w,
                     describe(isa, t.w.format, m, rows, cols));
      }
    }
  }
}

// The V4-Flash expert shapes scaled down (w1/w3: in 4096 -> out 2048, w2: 2048 -> 4096) keep the
// real per-row group counts' structure: 4 and 2 groups per 64-byte line pair, rows not a
// multiple of any tile.
TEST_P(MatmulIsaTest, Fp4ExpertLikeShapesMatchReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 600;
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{203, 4096}, {411, 2048}}) {
    const TestWeights t = make_weights(WeightFormat::fp4_e2m1_block, rows, cols, ++seed);
    for (int64_t m : {1, 6, 9}) {
      const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), ++seed);
      expect_close(run_matmul(isa, pool, x, m, t.w), run_reference(x, m, t.w), x, m, t.w,
                   describe(isa, t.w.format, m, rows, cols));
    }
  }
}

// The fp4 lane order (matmul.h): column k goes to lane (k mod 2L) / 2 in increasing k, FMA, then
// the same halving tree as the other formats.
float fp4_lane_order_model(const float* x, const WeightMatrix& w, int64_t n, int lanes) {
  std::vector<float> acc(static_cast<size_t>(lanes), 0.0f);
  for (int64_t k = 0; k < w.cols; ++k) {
    const int64_t lane = (k % (2 * lanes)) / 2;
    acc[lane] = std::fma(x[k], weight_at_ref(w, n, k), acc[lane]);
  }
  for (int half = lanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) acc[l] = acc[l] + acc[l + half];
  }
  return acc[0];
}

TEST_P(MatmulIsaTest, Fp4FollowsItsDocumentedLaneOrderAndIsBatchInvariant) {
  const Isa isa = GetParam();
  if (isa == Isa::reference) GTEST_SKIP() << "the reference order is the plain loop (tested by the sweep)";
  const int lanes = isa == Isa::avx512 ? 16 : 8;
  for (int64_t cols : {32, 96, 1024}) {
    const int64_t rows = 19;
    constexpr int64_t kM = 23;
    const TestWeights t = make_weights(WeightFormat::fp4_e2m1_block, rows, cols, 41);
    const std::vector<float> x = random_normal(static_cast<size_t>(kM * cols), 42);
    for (int n_threads : {1, 2, 3}) {
      ThreadPool pool(n_threads);
      const std::vector<float> y = run_matmul(isa, pool, x, kM, t.w);
      for (int64_t i = 0; i < kM; ++i) {
        const std::vector<float> x_row(x.begin() + i * cols, x.begin() + (i + 1) * cols);
        const std::vector<float> y_row = run_matmul(isa, pool, x_row, 1, t.w);
        // m = 2 and 3 take their own decode tiles: the row as the last of a small batch.
        const std::vector<float> x_pair(x.begin() + (i == 0 ? 0 : i - 1) * cols, x.begin() + (i + 1) * cols);
        const std::vector<float> y_pair = run_matmul(isa, pool, x_pair, i == 0 ? 1 : 2, t.w);
        const int64_t pair_row = i == 0 ? 0 : 1;
        for (int64_t n = 0; n < rows; ++n) {
          const float want = fp4_lane_order_model(&x[i * cols], t.w, n, lanes);
          ASSERT_TRUE(bit_equal(y[i * rows + n], want))
              << describe(isa, t.w.format, kM, rows, cols) << " y[" << i << ", " << n
              << "] = " << y[i * rows + n] << ", lane model " << want;
          ASSERT_TRUE(bit_equal(y_row[n], want)) << "m=1 row " << i << " n=" << n;
          ASSERT_TRUE(bit_equal(y_pair[pair_row * rows + n], want)) << "m=2 row " << i << " n=" << n;
        }
      }
    }
  }
}

// Scale bytes at the ends of the E8M0 range: 0 (2^-127, subnormal weights), 254 (6 · 2^127
// overflows to Inf, as in the reference's f32 product) and 255 (NaN).
TEST_P(MatmulIsaTest, Fp4ExtremeScalesMatchReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  const int64_t rows = 12, cols = 96, m = 3;
  TestWeights t = make_weights(WeightFormat::fp4_e2m1_block, rows, cols, 51);
  for (int64_t g = 0; g < 3; ++g) {
    t.scales_e8m0[0 * 3 + g] = 0;  // row 0: subnormal weights everywhere
    t.scales_e8m0[1 * 3 + g] = 1;  // row 1: 2^-126
  }
  t.scales_e8m0[5 * 3 + 1] = 254;  // row 5: Inf weights for nonzero codes in group 1
  t.fp8[5 * 48 + 16] = 0x77;       // ... and two of them are ±6 · 2^127 = Inf for sure
  t.scales_e8m0[9 * 3 + 2] = 255;  // row 9: NaN
  std::vector<float> x = random_normal(static_cast<size_t>(m * cols), 52);
  const std::vector<float> y = run_matmul(isa, pool, x, m, t.w);
  const std::vector<float> y_ref = run_reference(x, m, t.w);
  for (int64_t i = 0; i < m; ++i) {
    EXPECT_TRUE(std::isinf(y_ref[i * rows + 5]) || std::isnan(y_ref[i * rows + 5]));
    EXPECT_TRUE(std::isnan(y_ref[i * rows + 9]));
    for (int64_t n = 0; n < rows; ++n) {
      const float got = y[i * rows + n], want = y_ref[i * rows + n];
      if (!std::isfinite(want)) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
            << describe(isa, t.w.format, m, rows, cols) << " y[" << i << ", " << n << "] = " << got << " vs "
            << want;
      }
    }
  }
  // The finite rows within the sweep's tolerance (rows 5 and 9 excluded by zeroing them).
  t.scales_e8m0[5 * 3 + 1] = 127;
  t.scales_e8m0[9 * 3 + 2] = 127;
  expect_close(run_matmul(isa, pool, x, m, t.w), run_reference(x, m, t.w), x, m, t.w,
               describe(isa, t.w.format, m, rows, cols) + " extreme scales");
  EXPECT_NE(run_reference(x, m, t.w)[0], 0.0f) << "subnormal weights must not flush to zero";
}

// V4's FP8 weights: E8M0 128x128 block scales arrive as f32 powers of two; widths with a partial
// last block (N and K not multiples of 128), scales spanning 2^-20 .. 2^3.
TEST_P(MatmulIsaTest, Fp8PowerOfTwoScalesV4LikeShapes) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 700;
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{300, 512}, {200, 448}, {129, 1040}}) {
    TestWeights t = make_weights(WeightFormat::fp8_e4m3_block, rows, cols, ++seed, 128, 128);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> exponent(-20, 3);
    for (auto& s : t.scales) s = std::ldexp(1.0f, exponent(rng));
    for (int64_t m : {1, 4, 7, 24}) {
      const std::vector<float> x = random_normal(static_cast<size_t>(m * cols), ++seed);
      const std::vector<float> y = run_matmul(isa, pool, x, m, t.w);
      expect_close(y, run_reference(x, m, t.w), x, m, t.w,
                   describe(isa, t.w.format, m, rows, cols) + " pow2");
      if (isa != Isa::reference) {
        const int lanes = isa == Isa::avx512 ? 16 : 8;
        for (int64_t n = 0; n < rows; n += 37) {
          ASSERT_TRUE(bit_equal(y[n], lane_order_model(x.data(), t.w, n, lanes)))
              << "pow2 lane order n=" << n;
        }
      }
    }
  }
}

// The AVX-512 fp8 GEMV moves power-of-two block factors onto x (x86/avx512/matmul_avx512.cpp,
// gemv_fp8) only where that is exact; block rows where x·scale·2^120 would overflow, or whose
// scales are below 2^-117 or not powers of two, take the general tile. Every row must still follow
// the documented lane order bit for bit, whichever the block row took, and column ranges that cut
// block rows and tiles anywhere give the same bits.
TEST_P(MatmulIsaTest, Fp8GemvFoldedAndUnfoldedBlockRowsKeepTheLaneOrder) {
  const Isa isa = GetParam();
  if (isa == Isa::reference) GTEST_SKIP() << "checks the vector paths' lane order";
  const int lanes = isa == Isa::avx512 ? 16 : 8;
  const int64_t rows = 512, cols = 384;
  TestWeights t = make_weights(WeightFormat::fp8_e4m3_block, rows, cols, 901, 128, 128);
  // Block row 0: powers of two (folds); 1: one scale 2^-120 (too small: general); 2: 2^7, with
  // x large enough below that x·2^127 overflows (general); 3: not powers of two (general).
  for (int64_t kb = 0; kb < 3; ++kb) {
    t.scales[0 * 3 + kb] = std::ldexp(1.0f, -9 - static_cast<int>(kb));
    t.scales[1 * 3 + kb] = kb == 1 ? std::ldexp(1.0f, -120) : std::ldexp(1.0f, -5);
    t.scales[2 * 3 + kb] = std::ldexp(1.0f, 7);
    t.scales[3 * 3 + kb] = 0.0137f * static_cast<float>(kb + 1);
  }
  t.w.scales = t.scales.data();
  std::vector<float> x = random_normal(static_cast<size_t>(cols), 902);
  x[200] = 3.0e3f;  // x·2^7·2^120 = 2^127·3000 overflows f32
  ThreadPool pool(2);
  const std::vector<float> y = run_matmul(isa, pool, x, 1, t.w);
  for (int64_t n = 0; n < rows; ++n) {
    ASSERT_TRUE(bit_equal(y[n], lane_order_model(x.data(), t.w, n, lanes))) << "row " << n;
  }
  expect_close(y, run_reference(x, 1, t.w), x, 1, t.w, describe(isa, t.w.format, 1, rows, cols) + " fold");
  // Column ranges that start and end inside tiles and block rows.
  std::vector<float> y_cut(static_cast<size_t>(rows), -1.0f);
  MatmulArgs args{x.data(), 1, cols, &t.w, y_cut.data(), rows};
  for (int64_t b : {int64_t{0}, int64_t{3}, int64_t{125}, int64_t{133}, int64_t{260}, int64_t{509}}) {
    const int64_t e = std::min<int64_t>(rows, b + 131);
    matmul_cols(isa, args, b, e);
    for (int64_t n = b; n < e; ++n) ASSERT_TRUE(bit_equal(y_cut[n], y[n])) << "range " << b << " row " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatmulIsaTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) {
                           return std::string(isa_name(p.param));
                         });

TEST(Isa, NamesRoundTripAndBestIsSupported) {
  for (Isa isa : kAllIsas) EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  EXPECT_FALSE(isa_from_name("sse9").has_value());
  EXPECT_TRUE(isa_supported(Isa::reference));
  EXPECT_TRUE(isa_supported(best_isa()));
  // avx512 implies avx2 in our definition (the avx512 path also uses AVX2/FMA instructions).
  if (isa_supported(Isa::avx512)) {
    EXPECT_TRUE(isa_supported(Isa::avx2));
  }
}

// The one ISA list and the per-path tables: every supported path has a complete table naming
// itself, and supported_isas() is exactly the supported entries of kAllIsas, reference first.
TEST(Isa, EverySupportedPathHasACompleteTable) {
  const std::vector<Isa> supported = supported_isas();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), Isa::reference);
  EXPECT_EQ(supported.back(), best_isa());
  size_t n_supported = 0;
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) {
      std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", isa_name(isa).data());
      continue;
    }
    ++n_supported;
    const KernelTable& t = kernel_table(isa);
    EXPECT_EQ(t.isa, isa);
    const void* entries[] = {reinterpret_cast<const void*>(t.matmul_cols),
                             reinterpret_cast<const void*>(t.matmul_cols_bf16x),
                             reinterpret_cast<const void*>(t.round_rows_bf16),
                             reinterpret_cast<const void*>(t.rmsnorm),
                             reinterpret_cast<const void*>(t.rmsnorm_f64),
                             reinterpret_cast<const void*>(t.rope_rotate),
                             reinterpret_cast<const void*>(t.silu_mul),
                             reinterpret_cast<const void*>(t.softmax),
                             reinterpret_cast<const void*>(t.mla_attention_absorbed),
                             reinterpret_cast<const void*>(t.mha_attention),
                             reinterpret_cast<const void*>(t.hadamard_rows),
                             reinterpret_cast<const void*>(t.quant_sim_rows),
                             reinterpret_cast<const void*>(t.compressor_entry),
                             reinterpret_cast<const void*>(t.indexer_scores_range),
                             reinterpret_cast<const void*>(t.sparse_attention_heads)};
    for (const void* e : entries) EXPECT_NE(e, nullptr) << isa_name(isa);
    EXPECT_GE(t.gemm_tile_m, 1);
    EXPECT_GE(t.gemm_tile_n, 1);
    EXPECT_GE(t.gemv_tile_n, 1);
  }
  EXPECT_EQ(n_supported, supported.size());
}

TEST(MatmulPlan, TilesAndTasksFollowShape) {
  WeightMatrix w;
  w.format = WeightFormat::bf16;
  w.rows = 4096;
  w.cols = 7168;
  const MatmulPlan decode = plan_matmul(Isa::avx512, 1, w, 2);
  EXPECT_EQ(decode.tile_m, 1);
  EXPECT_EQ(decode.n_tasks, 2);
  EXPECT_EQ(decode.n_grain % decode.tile_n, 0);
  const MatmulPlan prefill = plan_matmul(Isa::avx512, 512, w, 3);
  EXPECT_GT(prefill.tile_m, 1);
  EXPECT_EQ(prefill.n_tasks, 3);
  EXPECT_EQ(plan_matmul(Isa::avx2, 0, w, 2).n_tasks, 0);
  // Tiny work stays on one thread; never more tasks than grains.
  w.rows = 8;
  w.cols = 16;
  EXPECT_EQ(plan_matmul(Isa::avx512, 1, w, 8).n_tasks, 1);
  w.rows = 5;
  w.cols = 1 << 20;
  EXPECT_LE(plan_matmul(Isa::reference, 1, w, 8).n_tasks, 5);
}

TEST(MatmulPlan, TaskRangesPartitionColumnsOnGrainBoundaries) {
  WeightMatrix w;
  w.cols = 4096;
  for (int64_t rows : {1, 7, 64, 1000, 129280}) {
    w.rows = rows;
    for (int n_threads : {1, 2, 3, 16}) {
      for (Isa isa : kAllIsas) {
        const MatmulPlan plan = plan_matmul(isa, 4, w, n_threads);
        ASSERT_GE(plan.n_tasks, 1);
        ASSERT_LE(plan.n_tasks, n_threads);
        int64_t next = 0;
        for (int t = 0; t < plan.n_tasks; ++t) {
          const ColumnRange r = plan_task_range(plan, rows, t);
          EXPECT_EQ(r.begin, next);
          EXPECT_EQ(r.begin % plan.n_grain, 0);
          EXPECT_LE(r.begin, r.end);
          next = r.end;
        }
        EXPECT_EQ(next, rows);
      }
    }
  }
}

}  // namespace
}  // namespace ds
