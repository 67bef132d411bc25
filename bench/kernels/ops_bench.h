// The elementwise and attention part of kernel_bench: RMSNorm, softmax and MLA absorbed decode
// attention, each as GB/s (bytes the op must move) against the read bandwidth of the same run.
#pragma once

#include <vector>

#include "kernels/isa.h"
#include "machine/peaks.h"

namespace ds::bench {

struct OpsBenchOptions {
  std::vector<Isa> isas;           // include Isa::reference for the baseline row
  std::vector<int> thread_counts;  // attention only (norm and softmax are single-row kernels)
  bool quick = false;
  int n_warmup = 1;
  int n_runs = 5;
  uint64_t seed = 42;
};

void run_ops_bench(const OpsBenchOptions& options, const MachinePeaks& peaks);

}  // namespace ds::bench
