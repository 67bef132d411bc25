// matmul_cpu_bench: one matmul case on one thread, timed in CPU seconds (what the process was
// given), against the one-thread peaks of the same run. On a shared host wall-clock medians mostly
// measure the other processes; CPU time per call does not count the time the thread waited for a
// core, so A/B ratios between kernel variants stay meaningful. (It still includes slow-downs from a
// busy sibling hyperthread or a lower clock, like the peaks' best runs may not: read the ratios.)
//   matmul_cpu_bench --format bf16|fp8|fp4 [--fp8-pow2-scales] [--bf16-activations] [--m 1]
//                    [--rows 1536] [--cols 2048] [--calls N] [--isa avx512]
// W stays in cache (one matrix, reused): this measures the kernel's compute cost per weight, the
// bound a DRAM-streaming GEMV cannot beat.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/thread_pool.h"
#include "bench_weights.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "machine/bench_timing.h"
#include "machine/host_load.h"
#include "machine/peaks.h"
#include "machine/read_probe.h"

int main(int argc, char** argv) {
  CLI::App app{"matmul_cpu_bench: one matmul case, CPU time per call vs the one-thread peaks"};
  std::string format = "bf16", isa_name = ds::isa_name(ds::best_isa()).data();
  bool pow2 = false, bf16_act = false;
  int64_t m = 1, rows = 1536, cols = 2048;
  int calls = 0, paired = 0;
  app.add_option("--format", format, "bf16, fp8 or fp4 (E2M1, E8M0 scales per 32: V4 experts)")
      ->check(CLI::IsMember({"bf16", "fp8", "fp4"}));
  app.add_flag("--fp8-pow2-scales", pow2, "fp8 block scales as powers of two (V4)");
  app.add_flag("--bf16-activations", bf16_act, "x rounded to bf16 (vdpbf16ps for bf16 weights)");
  app.add_option("--m", m, "rows of x")->check(CLI::Range(1, 4096));
  app.add_option("--rows", rows, "output features")->check(CLI::Range(1, 1 << 20));
  app.add_option("--cols", cols, "input features (a multiple of 128 for fp8)")
      ->check(CLI::Range(32, 1 << 20));
  app.add_option("--calls", calls, "timed calls (default: about 2 CPU seconds)");
  app.add_option("--isa", isa_name, "kernel path");
  app.add_option("--paired-reads", paired,
                 "then N (call, read pass over as many bytes as W) pairs: W's rate as a fraction of the read "
                 "rate of the same moment (median of the pairs' ratios; W should be far larger than L3)")
      ->check(CLI::Range(0, 100000));
  CLI11_PARSE(app, argc, argv);
  const auto isa = ds::isa_from_name(isa_name);
  if (!isa || !ds::isa_supported(*isa)) {
    fmt::print(stderr, "--isa {}: not a path this CPU supports\n", isa_name);
    return 2;
  }

  const ds::bench::MachinePeaks peaks = ds::bench::measure_peaks(1, ds::bench::quick_peak_options());
  const ds::WeightFormat f = format == "fp8"   ? ds::WeightFormat::fp8_e4m3_block
                             : format == "fp4" ? ds::WeightFormat::fp4_e2m1_block
                                               : ds::WeightFormat::bf16;
  const ds::bench::WeightSet ws(f, rows, cols, 1, 42, pow2);
  std::vector<float> x(static_cast<size_t>(m * cols)), y(static_cast<size_t>(m * rows));
  ds::bench::fill_signed_unit(x.data(), m * cols, 7);
  ds::MatmulArgs a{x.data(), m, cols, &ws.matrices()[0], y.data(), rows};
  a.bf16_activations = bf16_act;
  auto call = [&] { ds::matmul_cols(*isa, a, 0, rows); };
  call();  // warm-up: W and x into cache
  const double c0 = ds::bench::process_cpu_seconds();
  call();
  const double one = std::max(1e-6, ds::bench::process_cpu_seconds() - c0);
  if (calls <= 0) calls = static_cast<int>(std::clamp(2.0 / one, 3.0, 1e6));
  const double t0 = ds::bench::process_cpu_seconds();
  for (int i = 0; i < calls; ++i) call();
  const double per_call = (ds::bench::process_cpu_seconds() - t0) / calls;
  const double gflop = 2.0 * static_cast<double>(m * rows * cols) * 1e-9;
  const double gb = static_cast<double>(ws.matrices()[0].stored_bytes()) * 1e-9;
  const double fma = peaks.fp32_fma_roofline_gflops(1), dot = peaks.bf16_dot_roofline_gflops(1);
  fmt::print(
      "{}\none-thread peaks (best runs, this run): fp32 FMA {:.1f} GFLOP/s, bf16 dot {:.1f} GFLOP/s, read "
      "{:.1f} GB/s\n",
      ds::bench::format_host_load(ds::bench::read_host_load()), fma, dot, peaks.read_gbps.peak_at(1));
  fmt::print(
      "{} {}{}{} m={} {}x{} isa {}: {:.3f} ms CPU per call ({} calls), {:.1f} GFLOP per CPU-s "
      "({:.0f}% of fp32 FMA, {:.0f}% of bf16 dot), W {:.1f} GB per CPU-s\n",
      format, pow2 ? "pow2-scales " : "", bf16_act ? "bf16-activations" : "", "", m, rows, cols, isa_name,
      per_call * 1e3, calls, gflop / per_call, 100.0 * gflop / per_call / fma,
      dot > 0 ? 100.0 * gflop / per_call / dot : 0.0, gb / per_call);
  if (paired > 0) {
    ds::bench::ReadProbe probe(ws.matrices()[0].stored_bytes(), 1);
    std::vector<double> w_gbps, read_gbps;
    for (int i = 0; i < paired; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      w_gbps.push_back(gb / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      read_gbps.push_back(probe.pass_gbps());
    }
    fmt::print(
        "paired with a read pass over {:.1f} MB ({} pairs, wall clock): W {:.1f} GB/s, read {:.1f} GB/s "
        "(medians); W / read of the same moment: median {:.0f}%\n",
        static_cast<double>(probe.bytes()) * 1e-6, paired, ds::bench::median_of(w_gbps),
        ds::bench::median_of(read_gbps), 100.0 * ds::bench::median_ratio(w_gbps, read_gbps));
  }
  return 0;
}
