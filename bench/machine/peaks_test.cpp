// The peak loops must do exactly the work their op counts claim, or every "% of peak" in the
// benches is off by that factor. Each test runs a loop for a few iterations with inputs whose
// exact result is known and compares the checksum (the sum over all accumulator lanes).
// No timing is asserted.
#include <gtest/gtest.h>

#include <vector>

#include "machine/bench_timing.h"
#include "machine/cpu_features.h"
#include "machine/peak_loops.h"
#include "tensor/dtype.h"

namespace ds::bench {
namespace {

using loops::kPeakAccumulators;

// Small integers keep every f32 partial sum exact, so EXPECT_EQ is the right comparison.
constexpr int64_t kIters = 37;

// Σ over accumulators k (each starting at k) and lanes of the value lane_value(k) ends at.
template <class F>
double sum_over_accumulators(int lanes, F lane_value, int n_acc = kPeakAccumulators) {
  double total = 0;
  for (int k = 0; k < n_acc; ++k) total += lanes * lane_value(static_cast<double>(k));
  return total;
}

TEST(PeakLoops, Fp32FmaAvx512DoesOneFmaPerAccumulatorLanePerIteration) {
  if (!detect_cpu_features().avx512) GTEST_SKIP() << "no AVX-512";
  // acc = acc * 1 + 1: lane of accumulator k ends at k + kIters; 2 FLOPs per lane per iteration.
  EXPECT_EQ(loops::fma_f32_avx512(kIters, 1.0f, 1.0f),
            sum_over_accumulators(16, [](double k) { return k + kIters; }));
  EXPECT_EQ(loops::kFmaF32Zmm_FlopsPerIter, kPeakAccumulators * 16 * 2);
  // a = 2, b = 0: k * 2^kIters, so the multiply really uses a and the chains stay distinct.
  EXPECT_EQ(loops::fma_f32_avx512(kIters, 2.0f, 0.0f),
            sum_over_accumulators(16, [](double k) { return k * 0x1p37; }));
  EXPECT_EQ(loops::fma_f32_avx512(3, 2.0f, 1.0f),
            sum_over_accumulators(16, [](double k) { return 8 * k + 7; }));
}

TEST(PeakLoops, Fp32FmaAvx2DoesOneFmaPerAccumulatorLanePerIteration) {
  if (!detect_cpu_features().avx2) GTEST_SKIP() << "no AVX2";
  constexpr int kAcc = loops::kPeakAccumulatorsYmm;
  EXPECT_EQ(loops::fma_f32_avx2(kIters, 1.0f, 1.0f), sum_over_accumulators(
                                                         8, [](double k) { return k + kIters; }, kAcc));
  EXPECT_EQ(loops::fma_f32_avx2(3, 2.0f, 1.0f), sum_over_accumulators(
                                                    8, [](double k) { return 8 * k + 7; }, kAcc));
  EXPECT_EQ(loops::kFmaF32Ymm_FlopsPerIter, kAcc * 8 * 2);
}

TEST(PeakLoops, Bf16DotAccumulatesTwoProductsPerLane) {
  if (!detect_cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX512-BF16";
  // a*b = 1.5 * 2 = 3 per product, 2 products per f32 lane -> +6 per lane per iteration,
  // i.e. 32 multiply-adds = 64 FLOPs per instruction.
  EXPECT_EQ(loops::dot_bf16_avx512(kIters, f32_to_bf16(1.5f), f32_to_bf16(2.0f)),
            sum_over_accumulators(16, [](double k) { return k + 6.0 * kIters; }));
  EXPECT_EQ(loops::kDotBf16Zmm_FlopsPerIter, kPeakAccumulators * 16 * 2 * 2);
}

TEST(PeakLoops, VnniAccumulatesFourProductsPerLane) {
  if (!detect_cpu_features().avx512_vnni) GTEST_SKIP() << "no AVX512-VNNI";
  // u8 200 * s8 -3 = -600, 4 products per i32 lane: 64 multiply-adds = 128 ops per instruction.
  // 200 > 127 checks the first operand is treated as unsigned.
  const double expect = sum_over_accumulators(16, [](double k) { return k - 600.0 * 4 * kIters; });
  EXPECT_EQ(static_cast<double>(loops::dot_u8s8_avx512(kIters, 200, -3)), expect);
  EXPECT_EQ(loops::kDotU8S8Zmm_OpsPerIter, kPeakAccumulators * 16 * 4 * 2);
}

TEST(PeakLoops, WidenFmaLoopsConvertEveryWeight) {
  const CpuFeatures cpu = detect_cpu_features();
  // w[i] = i % 8 (exact in f16 and bf16), x = 2: sum = 2 * kIters * Σ w.
  std::vector<uint16_t> w_f16(loops::kWidenZmmBlockElems), w_bf16(loops::kWidenZmmBlockElems);
  double sum_w_zmm = 0, sum_w_ymm = 0;
  for (size_t i = 0; i < w_f16.size(); ++i) {
    const float v = static_cast<float>(i % 8);
    w_f16[i] = f32_to_f16(v);
    w_bf16[i] = f32_to_bf16(v);
    sum_w_zmm += v;
    if (static_cast<int64_t>(i) < loops::kWidenYmmBlockElems) sum_w_ymm += v;
  }
  if (cpu.avx512) {
    EXPECT_EQ(loops::f16c_fma_avx512(kIters, w_f16.data(), 2.0f), 2.0 * kIters * sum_w_zmm);
    EXPECT_EQ(loops::bf16_widen_fma_avx512(kIters, w_bf16.data(), 2.0f), 2.0 * kIters * sum_w_zmm);
  }
  if (cpu.avx2) {
    EXPECT_EQ(loops::f16c_fma_avx2(kIters, w_f16.data(), 2.0f), 2.0 * kIters * sum_w_ymm);
  }
}

TEST(PeakLoops, MemoryLoopsReadEveryElementIncludingTails) {
  const CpuFeatures cpu = detect_cpu_features();
  for (int64_t n : {0, 1, 15, 63, 64, 65, 1000, 4099}) {
    std::vector<float> src(static_cast<size_t>(n)), dst(static_cast<size_t>(n), -1.0f);
    std::vector<float> b(static_cast<size_t>(n)), c(static_cast<size_t>(n));
    double expect = 0;
    for (int64_t i = 0; i < n; ++i) {
      src[i] = static_cast<float>(i % 5);
      b[i] = static_cast<float>(i % 3);
      c[i] = static_cast<float>(i % 7);
      expect += src[i];
    }
    auto check_copy_triad = [&](auto copy, auto triad, const char* isa) {
      std::fill(dst.begin(), dst.end(), -1.0f);
      copy(src.data(), dst.data(), n);
      EXPECT_EQ(dst, src) << isa << " copy n=" << n;
      triad(dst.data(), b.data(), c.data(), 0.5f, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(dst[i], b[i] + 0.5f * c[i]) << isa << " triad n=" << n << " i=" << i;
    };
    EXPECT_EQ(loops::read_sum_baseline(src.data(), n), expect) << "n=" << n;
    check_copy_triad(loops::copy_baseline, loops::triad_baseline, "baseline");
    if (cpu.avx2) {
      EXPECT_EQ(loops::read_sum_avx2(src.data(), n), expect) << "n=" << n;
      check_copy_triad(loops::copy_avx2, loops::triad_avx2, "avx2");
    }
    if (cpu.avx512) {
      EXPECT_EQ(loops::read_sum_avx512(src.data(), n), expect) << "n=" << n;
      check_copy_triad(loops::copy_avx512, loops::triad_avx512, "avx512");
    }
  }
}

TEST(BenchTiming, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median_of({}), 0.0);
  EXPECT_EQ(median_of({3.0}), 3.0);
  EXPECT_EQ(median_of({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(median_of({4.0, 1.0, 3.0, 2.0}), 2.5);
}

TEST(BenchTiming, RunsWarmupPlusTimedCalls) {
  int calls = 0;
  const RunStats s = time_runs(2, 5, [&] { ++calls; });
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(s.n_runs, 5);
  EXPECT_LE(s.min_s, s.median_s);
  EXPECT_LE(s.median_s, s.max_s);
}

TEST(BenchTiming, BudgetStopsAfterMinRunsOnceSpent) {
  int calls = 0;
  // A zero budget is spent at once: warm-up + exactly min_runs.
  RunStats s = time_runs_budget(1, 2, 9, 0.0, [&] { ++calls; });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s.n_runs, 2);
  // A budget no run can spend: max_runs.
  calls = 0;
  s = time_runs_budget(0, 2, 9, 1e9, [&] { ++calls; });
  EXPECT_EQ(calls, 9);
  EXPECT_EQ(s.n_runs, 9);
}

}  // namespace
}  // namespace ds::bench
