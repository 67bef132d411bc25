#include "matmul_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "base/aligned_buffer.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "bench_weights.h"
#include "kernels/matmul.h"
#include "machine/bench_timing.h"
#include "machine/host_load.h"

namespace ds::bench {
namespace {

std::string shape_cell(const MatmulShape& s) { return fmt::format("{} {}->{}", s.name, s.cols, s.rows); }

void print_header() {
  fmt::print("{:<30} {:>5} {:>9} {:>3} {:>4} {:>10} {:>8} {:>9} {:>8} {:>8} {:>7} {:>5}\n", "shape (in->out)",
             "fmt", "isa", "thr", "m", "ms/call", "W GB/s", "GFLOP/s", "%readBW", "%FMA", "x ref", "cpu%");
}

void print_row(const MatmulResult& r) {
  fmt::print(
      "{:<30} {:>5} {:>9} {:>3} {:>4} {:>10.3f} {:>8.1f} {:>9.1f} {:>7.0f}% {:>7.0f}% {:>7} {:>4.0f}%\n",
      shape_cell(r.shape), weight_format_name(r.format), isa_name(r.isa), r.n_threads, r.m, r.median_s * 1e3,
      r.weight_gbps, r.gflops, r.pct_read_peak, r.pct_fma_peak,
      r.speedup_vs_reference > 0 ? fmt::format("{:.0f}x", r.speedup_vs_reference) : "", 100.0 * r.cpu_share);
  std::fflush(stdout);
}

struct CaseSpec {
  const MatmulShape* shape;
  const WeightSet* weights;
  Isa isa;
  ThreadPool* pool;
  int64_t m;
  bool streamed;
  int n_runs;
};

MatmulResult run_case(const CaseSpec& c, const MatmulBenchOptions& opt, const MachinePeaks& peaks) {
  const WeightMatrix& w0 = c.weights->matrices()[0];
  AlignedBuffer<float> x(static_cast<size_t>(c.m * w0.cols));
  AlignedBuffer<float> y(static_cast<size_t>(c.m * w0.rows));
  fill_signed_unit(x.data(), c.m * w0.cols, opt.seed + static_cast<uint64_t>(c.m));
  const size_t n_mats = c.streamed ? c.weights->matrices().size() : 1;
  const double cpu0 = process_cpu_seconds(), wall0 = now_seconds();
  const RunStats s =
      time_runs_budget(opt.n_warmup, std::min(opt.min_runs, c.n_runs), c.n_runs, opt.budget_s, [&] {
        for (size_t i = 0; i < n_mats; ++i) {
          MatmulArgs a;
          a.x = x.data();
          a.m = c.m;
          a.ldx = w0.cols;
          a.w = &c.weights->matrices()[i];
          a.y = y.data();
          a.ldy = w0.rows;
          a.bf16_activations = opt.bf16_activations;
          matmul(c.isa, *c.pool, a);
        }
      });
  const double cpu_s = process_cpu_seconds() - cpu0, wall_s = now_seconds() - wall0;
  MatmulResult r;
  r.cpu_share = cpu_share(cpu_s, wall_s, c.pool->n_threads());
  r.shape = *c.shape;
  r.format = w0.format;
  r.isa = c.isa;
  r.n_threads = c.pool->n_threads();
  r.m = c.m;
  r.median_s = s.median_s / static_cast<double>(n_mats);
  r.weight_gbps = static_cast<double>(w0.stored_bytes()) / r.median_s * 1e-9;
  r.gflops = 2.0 * static_cast<double>(c.m * w0.rows * w0.cols) / r.median_s * 1e-9;
  const double bw = peaks.read_gbps.peak_at(r.n_threads);
  const bool dot_peak = opt.bf16_activations && w0.format == WeightFormat::bf16 &&
                        peaks.bf16_dot_roofline_gflops(r.n_threads) > 0 && c.isa == Isa::avx512;
  const double fma =
      dot_peak ? peaks.bf16_dot_roofline_gflops(r.n_threads) : peaks.fp32_fma_roofline_gflops(r.n_threads);
  r.pct_read_peak = bw > 0 ? 100.0 * r.weight_gbps / bw : 0;
  r.pct_fma_peak = fma > 0 ? 100.0 * r.gflops / fma : 0;
  return r;
}

}  // namespace

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::f32:
      return "f32";
    case WeightFormat::bf16:
      return "bf16";
    case WeightFormat::fp8_e4m3_block:
      return "fp8";
    case WeightFormat::fp4_e2m1_block:
      return "fp4";
  }
  return "?";
}

std::vector<MatmulShape> bench_model_matmul_shapes() {
  return {
      {"bench.dense_up", 2048, 10944},  // dense-layer gate/up proj
      {"bench.dense_down", 10944, 2048},
      {"bench.q_a", 2048, 1536},
      {"bench.q_b", 1536, 3072},  // 16 heads x 192
  };
}

std::vector<MatmulShape> v3_matmul_shapes() {
  return {
      {"v3.expert_up", 7168, 2048},  // routed expert gate/up proj
      {"v3.expert_down", 2048, 7168},
  };
}

std::vector<MatmulShape> v4_matmul_shapes() {
  return {
      {"v4.expert_up", 4096, 2048},  // V4-Flash routed expert w1/w3 (FP4 in the checkpoint)
      {"v4.expert_down", 2048, 4096},
  };
}

std::vector<MatmulShape> quick_matmul_shapes() {
  return {{"bench.dense_up", 2048, 10944}, {"bench.dense_down", 10944, 2048}};
}

std::vector<MatmulResult> run_matmul_bench(const MatmulBenchOptions& opt, const MachinePeaks& peaks) {
  std::map<int, std::unique_ptr<ThreadPool>> pools;
  for (int t : opt.thread_counts) {
    if (!pools.count(t)) pools[t] = std::make_unique<ThreadPool>(t);
  }
  std::vector<MatmulResult> results;
  fmt::print(
      "matmul y[m, out] = x[m, in] . W[out, in]^T; W GB/s = stored weight bytes (incl. fp8 scales) per "
      "second (fp4: 4.25 bits/weight incl. E8M0 scales); m <= {} streams {} MiB of W copies from DRAM, "
      "larger m reuses one W.\n"
      "%readBW: of the best read run at the same thread count; %FMA: of the fp32 FMA roofline of the widest "
      "ISA\n"
      "(best run, at least threads x the 1-thread peak);\n"
      "cpu%: CPU time the bench got / (wall time x threads) during the case (well below 100%: host busy)\n",
      opt.max_streamed_m, opt.stream_bytes >> 20);
  print_header();

  if (opt.reference_baseline) {
    // Baseline: the scalar reference against each vector path on one small shape whose W stays
    // in cache (the reference is ~100x slower, so a DRAM-sized case would take too long).
    static const MatmulShape kBaselineShape{"bench.q_a", 2048, 1536};
    fmt::print(
        "-- baseline: scalar reference vs vector paths, 1 thread, W in cache (so %readBW may pass 100%) "
        "--\n");
    ThreadPool pool1(1);
    for (WeightFormat f : opt.formats) {
      const WeightSet ws(f, kBaselineShape.rows, kBaselineShape.cols, 1, opt.seed, opt.fp8_pow2_scales);
      for (int64_t m : {int64_t{1}, int64_t{4}}) {
        const MatmulResult ref =
            run_case({&kBaselineShape, &ws, Isa::reference, &pool1, m, false, 3}, opt, peaks);
        results.push_back(ref);
        print_row(ref);
        for (Isa isa : opt.isas) {
          MatmulResult r = run_case({&kBaselineShape, &ws, isa, &pool1, m, false, opt.n_runs}, opt, peaks);
          r.speedup_vs_reference = ref.median_s / r.median_s;
          results.push_back(r);
          print_row(r);
        }
      }
    }
    fmt::print("-- main table --\n");
  }

  for (const MatmulShape& shape : opt.shapes) {
    for (WeightFormat f : opt.formats) {
      WeightMatrix probe;
      probe.format = f;
      probe.rows = shape.rows;
      probe.cols = shape.cols;
      const WeightSet ws(f, shape.rows, shape.cols, copies_for_bytes(probe, opt.stream_bytes), opt.seed,
                         opt.fp8_pow2_scales);
      for (Isa isa : opt.isas) {
        for (int t : opt.thread_counts) {
          for (int64_t m : opt.ms) {
            const bool streamed = m <= opt.max_streamed_m;
            const CaseSpec c{&shape, &ws, isa, pools[t].get(), m, streamed, opt.n_runs};
            results.push_back(run_case(c, opt, peaks));
            print_row(results.back());
          }
        }
      }
    }
  }
  return results;
}

}  // namespace ds::bench
