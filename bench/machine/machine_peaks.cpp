// machine_peaks: prints this machine's memory bandwidth and per-ISA compute peaks, the
// denominators of every "% of peak" the kernel and model benches report.
//   machine_peaks [--threads N] [--quick] [--mem-mib M] [--runs R]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <thread>

#include "machine/peaks.h"

int main(int argc, char** argv) {
  CLI::App app{"Measure memory bandwidth and compute peaks (median of N runs)"};
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quick = false;
  int64_t mem_mib = 0;
  int n_runs = 0;
  app.add_option("--threads", n_threads, "threads for the all-threads column")->check(CLI::Range(1, 1024));
  app.add_flag("--quick", quick, "256 MiB buffer, fewer runs, no copy/triad");
  app.add_option("--mem-mib", mem_mib, "memory buffer size in MiB (default 1024, quick 256)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--runs", n_runs, "timed runs per measurement (memory and compute)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  ds::bench::PeakOptions opt = quick ? ds::bench::quick_peak_options() : ds::bench::PeakOptions{};
  if (mem_mib > 0) opt.mem_bytes = mem_mib << 20;
  if (n_runs > 0) {
    opt.mem_runs = n_runs;
    opt.compute_runs = n_runs;
  }
  const ds::bench::MachinePeaks peaks = ds::bench::measure_peaks(n_threads, opt);
  fmt::print("{}", ds::bench::format_peaks_table(peaks));
  return 0;
}
