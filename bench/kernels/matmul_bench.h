// The matmul part of kernel_bench: y = x · Wᵀ over the weight formats, ISAs, batch sizes m and
// thread counts asked for, each reported as weight GB/s and GFLOP/s and as a fraction of the
// machine peaks measured in the same run (decode: read bandwidth; prefill: fp32 FMA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "machine/peaks.h"
#include "tensor/weight_matrix.h"

namespace ds::bench {

struct MatmulShape {
  std::string name;  // "bench.dense_up"
  int64_t cols = 0;  // in_features
  int64_t rows = 0;  // out_features
};

// Shapes of the bench preset (V2-Lite widths), of DeepSeek-V3 (routed expert), and the two
// largest bench shapes for --quick.
std::vector<MatmulShape> bench_model_matmul_shapes();
std::vector<MatmulShape> v3_matmul_shapes();
std::vector<MatmulShape> v4_matmul_shapes();
std::vector<MatmulShape> quick_matmul_shapes();

struct MatmulBenchOptions {
  std::vector<MatmulShape> shapes;
  std::vector<WeightFormat> formats;
  std::vector<Isa> isas;           // vector paths; the reference runs separately (baseline)
  std::vector<int64_t> ms;         // rows of x
  std::vector<int> thread_counts;  // each <= the peaks' pool size
  // Batches up to max_streamed_m cycle through copies of W totalling stream_bytes, so every
  // call reads W from DRAM (decode); larger batches reuse one W (compute-bound prefill).
  int64_t stream_bytes = int64_t{256} << 20;
  int64_t max_streamed_m = 16;
  int n_warmup = 1;
  int n_runs = 5;  // at most this many timed runs per case, median reported
  int min_runs = 2;
  double budget_s = 0.4;  // stop after min_runs once the timed runs took this long
  bool fp8_pow2_scales = false;
  // bf16 weights with activations rounded to bf16 (MatmulArgs::bf16_activations); %FMA then is of
  // the bf16 dot-product (vdpbf16ps) peak where the CPU has one.
  bool bf16_activations = false;   // fp8 block scales as powers of two (V4's E8M0), else any f32
  bool reference_baseline = true;  // scalar reference vs vector paths on one small shape, m = 1, 4
  uint64_t seed = 42;
};

struct MatmulResult {
  MatmulShape shape;
  WeightFormat format = WeightFormat::f32;
  Isa isa = Isa::reference;
  int n_threads = 1;
  int64_t m = 0;
  double median_s = 0;  // per matmul call
  double weight_gbps = 0;
  double gflops = 0;
  double pct_read_peak = 0;         // weight GB/s / read peak (best run, same thread count)
  double pct_fma_peak = 0;          // GFLOP/s / fp32 FMA peak (best run, same thread count)
  double cpu_share = 0;             // CPU time / (wall time x threads) over the case's runs
  double speedup_vs_reference = 0;  // baseline section only: reference time / this time
};

std::string_view weight_format_name(WeightFormat f);  // "f32", "bf16", "fp8", "fp4"

// Runs every case, printing one table row per case as it finishes; returns the rows.
std::vector<MatmulResult> run_matmul_bench(const MatmulBenchOptions& options, const MachinePeaks& peaks);

}  // namespace ds::bench
