// The bf16-activation matmul option (MatmulArgs::bf16_activations): every supported path against
// an f64 reference of its definition (x and W rounded to bf16, matmul_bf16x.h) for bf16, fp8 (f32
// and power-of-two scales, odd block shapes) and fp4 weights, batch invariance (a row's bits do not
// depend on m, its position or the column range), W really rounded for fp8, and f32 weights left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_test_weights.h"
#include "kernels/ref/matmul_ref.h"
#include "tensor/dtype.h"

namespace ds {
namespace {

std::vector<float> random_x(int64_t n, uint32_t seed) {
  return testing_weights::random_normal(static_cast<size_t>(n), seed);
}

std::vector<float> run(Isa isa, ThreadPool& pool, const std::vector<float>& x, int64_t m,
                       const WeightMatrix& w, bool bf16_activations) {
  std::vector<float> y(static_cast<size_t>(m * w.rows), -1.0f);
  MatmulArgs a{x.data(), m, w.cols, &w, y.data(), w.rows};
  a.bf16_activations = bf16_activations;
  matmul(isa, pool, a);
  return y;
}

bool bit_equal(float a, float b) { return f32_to_bits(a) == f32_to_bits(b); }

// One weight matrix of the sweep: a format with its block shape and scale kind.
struct WeightCase {
  const char* name;
  WeightFormat format;
  int32_t block_rows = 128;
  int32_t block_cols = 128;
  bool pow2_scales = false;  // fp8: V4's E8M0 scales (decoded weights fit bf16 exactly)
};

testing_weights::TestWeights make_case(const WeightCase& c, int64_t rows, int64_t cols, uint32_t seed) {
  testing_weights::TestWeights t =
      testing_weights::make_weights(c.format, rows, cols, seed, c.block_rows, c.block_cols);
  if (c.pow2_scales) {
    for (float& s : t.scales) s = std::exp2(std::round(std::log2(s)));
  }
  return t;
}

// Tolerances. Against Σ bf16(x)·bf16(W) in f64 the paths differ only in f32 summation (γ_cols Σ|x_b·W_b|
// each, taken as 2·cols·2^-24 with margin) plus, for vdpbf16ps, flushing subnormal products (none
// here: |x| ≥ 2^-20 almost surely, decoded weights are zero or ≥ 2^-19, and products stay normal).
// Against the exact Σ x·W the rounding of each x to bf16 (8 significant bits: unit roundoff 2^-8)
// moves each term by at most 2^-8 |x·W| and that of W (fp8 with f32 scales only) by another 2^-8:
// (2^-7 + 2^-16) Σ|x·W| on top.
TEST(MatmulBf16Activations, EveryPathMatchesTheF64ReferenceAndIsBatchInvariant) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  const WeightCase cases[] = {
      {"bf16", WeightFormat::bf16},
      {"fp8", WeightFormat::fp8_e4m3_block},
      {"fp8_pow2", WeightFormat::fp8_e4m3_block, 128, 128, true},
      {"fp8_odd_blocks", WeightFormat::fp8_e4m3_block, 5, 24},
      {"fp8_blocks_48", WeightFormat::fp8_e4m3_block, 7, 48},  // chunks straddle blocks: panel halves
      {"fp4", WeightFormat::fp4_e2m1_block},
  };
  for (const WeightCase& wc : cases) {
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{37, 32}, {64, 96}, {131, 2048}, {20, 2080}}) {
      if (wc.format != WeightFormat::fp4_e2m1_block && cols == 96) continue;
      const int64_t cols_here = wc.format == WeightFormat::fp4_e2m1_block || cols != 2080 ? cols : 2083;
      const testing_weights::TestWeights b = make_case(wc, rows, cols_here, ++seed);
      const int64_t k_cols = b.w.cols;
      for (int64_t m : {1, 2, 5, 7, 13, 20}) {
        const std::vector<float> x = random_x(m * k_cols, ++seed);
        for (Isa isa : kAllIsas) {
          if (!isa_supported(isa)) {
            std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", isa_name(isa).data());
            continue;
          }
          const std::string what = std::string(isa_name(isa)) + " " + wc.name + " m=" + std::to_string(m) +
                                   " rows=" + std::to_string(rows) + " cols=" + std::to_string(k_cols);
          const std::vector<float> y = run(isa, pool, x, m, b.w, true);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t n = 0; n < rows; ++n) {
              double rounded = 0, exact = 0, mag = 0;
              for (int64_t k = 0; k < k_cols; ++k) {
                const float wk = weight_at_ref(b.w, n, k);
                const float xk = x[static_cast<size_t>(i * k_cols + k)];
                rounded += static_cast<double>(round_to_bf16(xk)) * round_to_bf16(wk);
                exact += static_cast<double>(xk) * wk;
                mag += std::fabs(static_cast<double>(xk) * wk);
              }
              const double got = y[static_cast<size_t>(i * rows + n)];
              const double sum_tol = 2.0 * static_cast<double>(k_cols) * 0x1p-24 * mag * 1.01;
              ASSERT_NEAR(got, rounded, sum_tol) << what << " i=" << i << " n=" << n;
              ASSERT_NEAR(got, exact, sum_tol + (0x1p-7 + 0x1p-16) * mag * 1.01)
                  << what << " i=" << i << " n=" << n;
            }
          }
          // Row i alone (m = 1) and in a column range gives the same bits as in the batch.
          for (int64_t i = 0; i < m; i += 3) {
            const std::vector<float> xi(x.begin() + i * k_cols, x.begin() + (i + 1) * k_cols);
            const std::vector<float> alone = run(isa, pool, xi, 1, b.w, true);
            for (int64_t n = 0; n < rows; ++n)
              ASSERT_TRUE(bit_equal(alone[n], y[static_cast<size_t>(i * rows + n)])) << what << " row " << i;
          }
          std::vector<float> cut(static_cast<size_t>(m * rows), -1.0f);
          MatmulArgs a{x.data(), m, k_cols, &b.w, cut.data(), rows};
          a.bf16_activations = true;
          for (int64_t n0 = 0; n0 < rows; n0 += 7) matmul_cols(isa, a, n0, std::min<int64_t>(rows, n0 + 7));
          for (size_t e = 0; e < cut.size(); ++e) ASSERT_TRUE(bit_equal(cut[e], y[e])) << what << " ranges";
        }
      }
    }
  }
}

// fp8 with a scale that bf16 cannot hold: every decoded weight is 1 · (1 + 2^-10 + 2^-12), which
// rounds to exactly 1 in bf16, and x = 1, so with the option y is exactly cols (a path that kept W
// in f32 gives cols · 1.00122); without it y is the f32 sum of the unrounded weights.
TEST(MatmulBf16Activations, Fp8WeightsAreRoundedToBf16) {
  ThreadPool pool(1);
  const int64_t rows = 19, cols = 256;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols), 0x38);  // E4M3 1.0
  const float scale = 1.0f + 0x1p-10f + 0x1p-12f;
  std::vector<float> scales(4, scale);
  WeightMatrix w;
  w.format = WeightFormat::fp8_e4m3_block;
  w.rows = rows;
  w.cols = cols;
  w.data = codes.data();
  w.scales = scales.data();
  for (int64_t m : {1, 3, 20}) {
    const std::vector<float> x(static_cast<size_t>(m * cols), 1.0f);
    for (Isa isa : supported_isas()) {
      const std::vector<float> on = run(isa, pool, x, m, w, true);
      const std::vector<float> off = run(isa, pool, x, m, w, false);
      for (size_t e = 0; e < on.size(); ++e) {
        ASSERT_EQ(on[e], static_cast<float>(cols)) << isa_name(isa) << " m=" << m;
        ASSERT_NEAR(off[e], cols * static_cast<double>(scale), 1e-3) << isa_name(isa) << " m=" << m;
      }
    }
  }
}

// x is rounded to the nearest bf16, ties to even, on every path: against an identity W (bf16 ones on
// the diagonal) y[i, n] is bf16(x[i, n]) exactly, for ties both ways, values that round up into the
// next binade, negative values and zeros (the vector paths round 16 values at a time); a NaN in x
// makes its row NaN (0 · NaN in every other column).
TEST(MatmulBf16Activations, XIsRoundedToNearestEven) {
  ThreadPool pool(1);
  const int64_t n = 48;
  std::vector<uint16_t> eye(static_cast<size_t>(n * n), 0);
  for (int64_t r = 0; r < n; ++r) eye[static_cast<size_t>(r * n + r)] = f32_to_bf16(1.0f);
  WeightMatrix w;
  w.format = WeightFormat::bf16;
  w.rows = n;
  w.cols = n;
  w.data = eye.data();
  const float specials[] = {1.0f + 0x1p-8f,
                            1.0f + 3 * 0x1p-8f,
                            -(1.0f + 0x1p-8f),
                            2.0f - 0x1p-9f,
                            1.0f + 0x1p-8f + 0x1p-20f,
                            0x1.fep120f,
                            -0.0f,
                            3.14159265f,
                            1e-30f,
                            -7.5e12f};
  std::vector<float> x = random_x(3 * n, 91);
  for (size_t e = 0; e < std::size(specials); ++e) x[e * 4] = specials[e];  // row 0
  x[2 * n + 17] = std::nanf("");                                            // row 2
  for (Isa isa : supported_isas()) {
    const std::vector<float> y = run(isa, pool, x, 3, w, true);
    for (int64_t e = 0; e < 2 * n; ++e) {
      const size_t i = static_cast<size_t>(e);
      EXPECT_TRUE(bit_equal(y[i], round_to_bf16(x[i])) || (y[i] == 0.0f && x[i] == 0.0f))
          << isa_name(isa) << " element " << e << ": x " << x[i] << " y " << y[i];
    }
    for (int64_t e = 2 * n; e < 3 * n; ++e)
      EXPECT_TRUE(std::isnan(y[static_cast<size_t>(e)])) << isa_name(isa);
  }
}

// round_rows_to_bf16 (MatmulArgs::x_bf16) is f32_to_bf16 bit for bit on every path: random values,
// ties both ways, subnormals, infinities, NaNs (quiet, sign kept), over row lengths that end inside a
// vector and a row stride wider than the row.
TEST(MatmulBf16Activations, RoundRowsToBf16IsF32ToBf16OnEveryPath) {
  std::vector<float> x = random_x(5 * 70, 123);
  const float specials[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1p-130f,
                            -0x1.8p-140f,   0x1.ffp127f,        -std::numeric_limits<float>::infinity(),
                            std::nanf(""),  -std::nanf(""),     std::numeric_limits<float>::signaling_NaN(),
                            -0.0f,          0x1.fffffep-127f};
  for (size_t e = 0; e < std::size(specials); ++e) x[e * 31 % x.size()] = specials[e];
  for (int64_t cols : {1, 16, 33, 70}) {
    const int64_t m = 5, ldx = 70;
    for (Isa isa : supported_isas()) {
      std::vector<uint16_t> out(static_cast<size_t>(m * cols), 0xdead);
      round_rows_to_bf16(isa, x.data(), m, ldx, cols, out.data());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t k = 0; k < cols; ++k) {
          ASSERT_EQ(out[static_cast<size_t>(i * cols + k)], f32_to_bf16(x[static_cast<size_t>(i * ldx + k)]))
              << isa_name(isa) << " cols " << cols << " i " << i << " k " << k;
        }
      }
    }
  }
}

// The option changes nothing for f32 weights.
TEST(MatmulBf16Activations, OtherFormatsIgnoreTheOption) {
  ThreadPool pool(1);
  const int64_t rows = 24, cols = 96;
  std::vector<float> wf = random_x(rows * cols, 77);
  WeightMatrix w;
  w.format = WeightFormat::f32;
  w.rows = rows;
  w.cols = cols;
  w.data = wf.data();
  const std::vector<float> x = random_x(3 * cols, 78);
  for (Isa isa : supported_isas()) {
    const std::vector<float> off = run(isa, pool, x, 3, w, false);
    const std::vector<float> on = run(isa, pool, x, 3, w, true);
    for (size_t e = 0; e < on.size(); ++e) ASSERT_TRUE(bit_equal(on[e], off[e])) << isa_name(isa);
  }
}

}  // namespace
}  // namespace ds
