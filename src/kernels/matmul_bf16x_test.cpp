// The bf16-activation matmul option (MatmulArgs::bf16_activations): every supported path against
// an f64 reference, batch invariance (a row's bits do not depend on m, its position or the column
// range), and the option leaving non-bf16 weights alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "tensor/dtype.h"

namespace ds {
namespace {

struct Bf16Weights {
  std::vector<uint16_t> data;
  WeightMatrix w;
};

Bf16Weights make_bf16(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Bf16Weights b;
  b.data.resize(static_cast<size_t>(rows * cols));
  for (auto& v : b.data) v = f32_to_bf16(normal(rng));
  b.w.format = WeightFormat::bf16;
  b.w.rows = rows;
  b.w.cols = cols;
  b.w.data = b.data.data();
  return b;
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
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

// Tolerances. Against Σ bf16(x)·W in f64 the paths differ only in f32 summation (γ_cols Σ|x_b·W|
// each, taken as 2·cols·2^-24 with margin) plus, for vdpbf16ps, flushing subnormal products (none
// here: |x|, |W| ≥ 2^-20 almost surely and products stay normal). Against the exact Σ x·W the
// rounding of each x to bf16 adds at most 2^-9 |x| per term: 2^-9 Σ|x·W| on top.
TEST(MatmulBf16Activations, EveryPathMatchesTheF64ReferenceAndIsBatchInvariant) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 32}, {64, 100}, {131, 2048}, {20, 2083}}) {
    const Bf16Weights b = make_bf16(rows, cols, ++seed);
    for (int64_t m : {1, 2, 5, 7, 13}) {
      const std::vector<float> x = random_x(m * cols, ++seed);
      for (Isa isa : kAllIsas) {
        if (!isa_supported(isa)) {
          std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", isa_name(isa).data());
          continue;
        }
        const std::string what = std::string(isa_name(isa)) + " m=" + std::to_string(m) +
                                 " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
        const std::vector<float> y = run(isa, pool, x, m, b.w, true);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t n = 0; n < rows; ++n) {
            double rounded = 0, exact = 0, mag = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double wk = bf16_to_f32(b.data[static_cast<size_t>(n * cols + k)]);
              const float xk = x[static_cast<size_t>(i * cols + k)];
              rounded += static_cast<double>(round_to_bf16(xk)) * wk;
              exact += static_cast<double>(xk) * wk;
              mag += std::fabs(static_cast<double>(xk) * wk);
            }
            const double got = y[static_cast<size_t>(i * rows + n)];
            const double sum_tol = 2.0 * static_cast<double>(cols) * 0x1p-24 * mag * 1.01;
            ASSERT_NEAR(got, rounded, sum_tol) << what << " i=" << i << " n=" << n;
            ASSERT_NEAR(got, exact, sum_tol + 0x1p-9 * mag * 1.01) << what << " i=" << i << " n=" << n;
          }
        }
        // Row i alone (m = 1) and in a column range gives the same bits as in the batch.
        for (int64_t i = 0; i < m; i += 3) {
          const std::vector<float> xi(x.begin() + i * cols, x.begin() + (i + 1) * cols);
          const std::vector<float> alone = run(isa, pool, xi, 1, b.w, true);
          for (int64_t n = 0; n < rows; ++n)
            ASSERT_TRUE(bit_equal(alone[n], y[static_cast<size_t>(i * rows + n)])) << what << " row " << i;
        }
        std::vector<float> cut(static_cast<size_t>(m * rows), -1.0f);
        MatmulArgs a{x.data(), m, cols, &b.w, cut.data(), rows};
        a.bf16_activations = true;
        for (int64_t n0 = 0; n0 < rows; n0 += 7) matmul_cols(isa, a, n0, std::min<int64_t>(rows, n0 + 7));
        for (size_t e = 0; e < cut.size(); ++e) ASSERT_TRUE(bit_equal(cut[e], y[e])) << what << " ranges";
      }
    }
  }
}

// The option changes nothing for f32 weights (only bf16 weights round x).
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
