#include "machine/read_probe.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "machine/bench_timing.h"
#include "machine/cpu_features.h"
#include "machine/peak_loops.h"

namespace ds::bench {
namespace {

constexpr int64_t kUnitFloats = 64;  // 256 B: the share of one thread is a whole number of these

using ReadSum = double (*)(const float*, int64_t);

ReadSum best_read_sum() {
  const CpuFeatures cpu = detect_cpu_features();
  if (cpu.avx512) return loops::read_sum_avx512;
  if (cpu.avx2) return loops::read_sum_avx2;
  return loops::read_sum_baseline;
}

// [begin, end) of thread t's share of n floats (n a multiple of kUnitFloats).
std::pair<int64_t, int64_t> share(int64_t n, int64_t t, int n_threads) {
  const int64_t units = n / kUnitFloats;
  return {units * t / n_threads * kUnitFloats, units * (t + 1) / n_threads * kUnitFloats};
}

}  // namespace

ReadProbe::ReadProbe(int64_t bytes, int n_threads)
    : pool_(std::max(1, n_threads)),
      n_threads_(std::max(1, n_threads)),
      read_sum_(best_read_sum()),
      sink_(static_cast<size_t>(n_threads_)) {
  if (bytes <= 0) throw std::invalid_argument("ReadProbe: bytes must be positive");
  const int64_t unit = kUnitFloats * n_threads_;
  const int64_t n = (bytes / 4 + unit - 1) / unit * unit;
  buf_.resize(static_cast<size_t>(n));
  pool_.parallel_for(n_threads_, [&](int64_t t) {
    const auto [b, e] = share(n, t, n_threads_);
    std::fill(buf_.data() + b, buf_.data() + e, 1.0f);
  });
}

double ReadProbe::pass_gbps() {
  const int64_t n = static_cast<int64_t>(buf_.size());
  const auto t0 = std::chrono::steady_clock::now();
  pool_.parallel_for(n_threads_, [&](int64_t t) {
    const auto [b, e] = share(n, t, n_threads_);
    sink_[static_cast<size_t>(t)] = read_sum_(buf_.data() + b, e - b);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(bytes()) / std::max(s, 1e-9) * 1e-9;
}

double median_ratio(std::span<const double> num, std::span<const double> den) {
  if (num.size() != den.size()) throw std::invalid_argument("median_ratio: sizes differ");
  if (num.empty()) return 0.0;
  std::vector<double> r(num.size());
  for (size_t i = 0; i < num.size(); ++i) r[i] = den[i] > 0 ? num[i] / den[i] : 0.0;
  return median_of(std::move(r));
}

}  // namespace ds::bench
