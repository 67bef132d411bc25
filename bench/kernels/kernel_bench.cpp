// kernel_bench: matmul (f32 / bf16 / fp8-block / fp4-block weights, every ISA path the CPU has, decode and
// prefill batch sizes, 1 and all threads) plus RMSNorm, softmax and MLA decode attention, each
// stated as a fraction of the machine peaks measured at the start of the same run.
//   kernel_bench [--quick] [--threads N] [--isa avx512,avx2] [--formats f32,bf16,fp8] [--m 1,4,...]
//                [--v3-shapes] [--v4-shapes] [--v4-ops] [--skip-ops] [--skip-matmul] [--seed S]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <thread>

#include "kernels/isa.h"
#include "machine/host_load.h"
#include "machine/peaks.h"
#include "matmul_bench.h"
#include "ops_bench.h"
#include "v4_ops_bench.h"

namespace {

std::vector<ds::Isa> parse_isas(const std::vector<std::string>& names) {
  std::vector<ds::Isa> isas;
  for (const std::string& n : names) {
    const auto isa = ds::isa_from_name(n);
    if (!isa) throw CLI::ValidationError("--isa", "unknown ISA '" + n + "' (avx512, avx2)");
    if (*isa == ds::Isa::reference) continue;  // the reference runs as the baseline
    if (ds::isa_supported(*isa))
      isas.push_back(*isa);
    else
      fmt::print("note: skipping {} (not supported by this CPU)\n", n);
  }
  return isas;
}

std::vector<ds::WeightFormat> parse_formats(const std::vector<std::string>& names) {
  std::vector<ds::WeightFormat> formats;
  for (const std::string& n : names) {
    if (n == "f32")
      formats.push_back(ds::WeightFormat::f32);
    else if (n == "bf16")
      formats.push_back(ds::WeightFormat::bf16);
    else if (n == "fp8")
      formats.push_back(ds::WeightFormat::fp8_e4m3_block);
    else if (n == "fp4")
      formats.push_back(ds::WeightFormat::fp4_e2m1_block);
    else
      throw CLI::ValidationError("--formats", "unknown format '" + n + "' (f32, bf16, fp8, fp4)");
  }
  return formats;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"Kernel throughput as a fraction of this machine's measured peaks"};
  bool quick = false, skip_ops = false, skip_matmul = false, v3_shapes = false, v4_shapes = false;
  bool v4_ops = false;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> isa_names = {"avx512", "avx2"};
  std::vector<std::string> format_names = {"f32", "bf16", "fp8"};
  std::vector<int64_t> ms;
  uint64_t seed = 42;
  app.add_flag("--quick", quick, "two shapes, m in {1, 64}, fewer runs, smaller peaks buffer");
  app.add_option("--threads", n_threads, "the all-threads count (runs use 1 and this)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--isa", isa_names, "vector paths to run (unsupported ones are skipped)")->delimiter(',');
  app.add_option("--formats", format_names, "weight formats")->delimiter(',');
  app.add_option("--m", ms, "batch sizes (rows of x)")->delimiter(',');
  app.add_flag("--v3-shapes", v3_shapes, "also the DeepSeek-V3 routed-expert shapes (7168x2048)");
  app.add_flag("--v4-shapes", v4_shapes, "also the DeepSeek-V4-Flash routed-expert shapes (4096x2048)");
  app.add_flag("--skip-ops", skip_ops, "matmul only");
  app.add_flag("--v4-ops", v4_ops,
               "also the DeepSeek-V4 kernels (Hadamard, quant sims, compressor, indexer, sparse attention)");
  app.add_flag("--skip-matmul", skip_matmul, "norm/softmax/attention only");
  app.add_option("--seed", seed, "seed of the random weights and activations");
  bool fp8_pow2_scales = false;
  bool bf16_activations = false;
  app.add_flag(
      "--bf16-activations", bf16_activations,
      "bf16 weights with x rounded to bf16 (vdpbf16ps on AVX-512 BF16); %FMA = of the bf16 dot peak");
  app.add_flag("--fp8-pow2-scales", fp8_pow2_scales,
               "fp8 block scales as powers of two (V4's E8M0 scales; the AVX-512 GEMV folds them into x)");
  CLI11_PARSE(app, argc, argv);

  const ds::bench::MachinePeaks peaks =
      ds::bench::measure_peaks(n_threads, quick ? ds::bench::quick_peak_options() : ds::bench::PeakOptions{});
  fmt::print("CPU: {} [{}]\n{}\n{}\n\n", peaks.cpu.brand, peaks.cpu.summary(),
             ds::bench::format_host_load(ds::bench::read_host_load()),
             ds::bench::format_roofline_line(peaks));

  std::vector<int> thread_counts = {1};
  if (n_threads > 1) thread_counts.push_back(n_threads);
  const std::vector<ds::Isa> isas = parse_isas(isa_names);

  if (!skip_matmul) {
    ds::bench::MatmulBenchOptions mo;
    mo.shapes = quick ? ds::bench::quick_matmul_shapes() : ds::bench::bench_model_matmul_shapes();
    if (v3_shapes) {
      for (auto& s : ds::bench::v3_matmul_shapes()) mo.shapes.push_back(s);
    }
    if (v4_shapes) {
      for (auto& s : ds::bench::v4_matmul_shapes()) mo.shapes.push_back(s);
    }
    mo.formats = parse_formats(format_names);
    mo.isas = isas;
    mo.fp8_pow2_scales = fp8_pow2_scales;
    mo.bf16_activations = bf16_activations;
    mo.ms = !ms.empty() ? ms : quick ? std::vector<int64_t>{1, 64} : std::vector<int64_t>{1, 4, 16, 64, 512};
    mo.thread_counts = thread_counts;
    mo.seed = seed;
    if (quick) {
      mo.stream_bytes = int64_t{128} << 20;
      mo.n_runs = 3;
      mo.budget_s = 0.2;
    }
    ds::bench::run_matmul_bench(mo, peaks);
    fmt::print("\n");
  }
  if (!skip_ops) {
    ds::bench::OpsBenchOptions oo;
    oo.isas = isas;
    oo.isas.insert(oo.isas.begin(), ds::Isa::reference);
    oo.thread_counts = thread_counts;
    oo.quick = quick;
    oo.n_runs = quick ? 3 : 5;
    oo.seed = seed;
    ds::bench::run_ops_bench(oo, peaks);
  }
  if (v4_ops) {
    ds::bench::V4OpsBenchOptions vo;
    vo.isas = isas;
    vo.isas.insert(vo.isas.begin(), ds::Isa::reference);
    vo.thread_counts = thread_counts;
    vo.quick = quick;
    vo.n_runs = quick ? 3 : 5;
    vo.seed = seed;
    fmt::print("\n");
    ds::bench::run_v4_ops_bench(vo, peaks);
  }
  fmt::print("\nat the end: {}\n", ds::bench::format_host_load(ds::bench::read_host_load()));
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "kernel_bench: {}\n", e.what());
  return 1;
}
