// A memory read pass run between a benchmark's timed calls, so that a kernel's or a model's
// bandwidth can be stated against the read rate of the same moment.
//
// Why: on a shared host the read bandwidth a thread gets swings by a third between minutes (the
// neighbours' traffic), so a decode rate divided by a read peak measured once at start-up mostly
// measures when each was taken. Alternating (call, read pass) pairs and taking the median of the
// per-pair ratios cancels that drift: both halves of a pair see the same neighbours.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"

namespace ds::bench {

class ReadProbe {
 public:
  // A buffer of `bytes` (rounded up to 256 B per thread), first touched by the threads that read
  // it; passes run on n_threads threads (1: the calling thread only).
  ReadProbe(int64_t bytes, int n_threads);

  // One timed pass over the whole buffer with the best read loop this CPU has (the one behind
  // MachinePeaks::read_gbps), in GB/s.
  double pass_gbps();

  int64_t bytes() const { return static_cast<int64_t>(buf_.size()) * 4; }

 private:
  ThreadPool pool_;
  int n_threads_;
  AlignedBuffer<float> buf_;
  double (*read_sum_)(const float*, int64_t);
  std::vector<double> sink_;  // each thread's sum: keeps the reads
};

// median over i of num[i] / den[i] (sizes must match; 0 when empty).
double median_ratio(std::span<const double> num, std::span<const double> den);

}  // namespace ds::bench
