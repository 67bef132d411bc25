// The DeepSeek-V4 part of kernel_bench: Hadamard-128, the FP8/FP4 quantise-dequantise
// simulations, the CSA/HCA compressor, indexer scoring + top-k and sparse attention with sink, at
// V4-Flash widths (64 heads, 512-d latent, 128-d indexer heads). Each row states GB/s (bytes the
// op must move) against the read bandwidth, and GFLOP/s against the fp32 FMA roofline, of the
// same run.
#pragma once

#include <vector>

#include "kernels/isa.h"
#include "machine/peaks.h"

namespace ds::bench {

struct V4OpsBenchOptions {
  std::vector<Isa> isas;           // include Isa::reference for the baseline rows
  std::vector<int> thread_counts;  // compressor / indexer / sparse attention (the row ops run on 1)
  bool quick = false;
  int n_warmup = 1;
  int n_runs = 5;
  uint64_t seed = 42;
};

void run_v4_ops_bench(const V4OpsBenchOptions& options, const MachinePeaks& peaks);

}  // namespace ds::bench
