#include "machine/peaks.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "machine/bench_timing.h"
#include "machine/host_load.h"
#include "machine/peak_loops.h"
#include "tensor/dtype.h"

namespace ds::bench {
namespace {

constexpr double kGiga = 1e9;

// One compute loop: runs n_iters iterations on the calling thread, returns a checksum.
using ComputeLoop = std::function<double(int64_t n_iters)>;

// Iterations that make one single-threaded call take about `seconds` (at least 1000).
int64_t calibrate_iters(const ComputeLoop& loop, double seconds) {
  int64_t n = 1000;
  for (;;) {
    const double t0 = now_seconds();
    loop(n);
    const double dt = now_seconds() - t0;
    if (dt >= 0.005 || n >= (int64_t{1} << 40)) {
      return std::max<int64_t>(1000,
                               static_cast<int64_t>(static_cast<double>(n) * seconds / std::max(dt, 1e-9)));
    }
    n *= 4;
  }
}

// {median, best} rate in units of 1e9 per second for `units` of work per timed call.
std::pair<double, double> rates(double units, const RunStats& s) {
  return {units / s.median_s / kGiga, units / s.min_s / kGiga};
}

// Rate (ops per second / 1e9) with `n_threads` threads each running n_iters iterations.
std::pair<double, double> compute_rate(ThreadPool& pool, int n_threads, const ComputeLoop& loop,
                                       int64_t n_iters, int64_t ops_per_iter, const PeakOptions& opt) {
  std::vector<double> checksums(static_cast<size_t>(n_threads));
  const RunStats s = time_runs(opt.n_warmup, opt.compute_runs, [&] {
    pool.parallel_for(n_threads, [&](int64_t t) { checksums[static_cast<size_t>(t)] = loop(n_iters); });
  });
  return rates(
      static_cast<double>(n_threads) * static_cast<double>(n_iters) * static_cast<double>(ops_per_iter), s);
}

Rate measure_compute(ThreadPool& pool, const ComputeLoop& loop, int64_t ops_per_iter,
                     const PeakOptions& opt) {
  const int64_t n_iters = calibrate_iters(loop, opt.compute_seconds_per_run);
  Rate r;
  r.available = true;
  std::tie(r.one_thread, r.one_thread_best) = compute_rate(pool, 1, loop, n_iters, ops_per_iter, opt);
  std::tie(r.all_threads, r.all_threads_best) =
      compute_rate(pool, pool.n_threads(), loop, n_iters, ops_per_iter, opt);
  return r;
}

Rate unavailable(std::string note) {
  Rate r;
  r.note = std::move(note);
  return r;
}

// [begin, end) of thread t's share of n elements, split in 64-element (256 B) units.
std::pair<int64_t, int64_t> share(int64_t n, int t, int n_threads) {
  const int64_t units = n / 64;
  const int64_t b = units * t / n_threads * 64;
  const int64_t e = t + 1 == n_threads ? n : units * (t + 1) / n_threads * 64;
  return {b, e};
}

// GB/s for `bytes_per_pass` moved by `pass(t, n_threads)` run on n_threads threads.
std::pair<double, double> memory_rate(ThreadPool& pool, int n_threads, double bytes_per_pass,
                                      const std::function<void(int, int)>& pass, const PeakOptions& opt) {
  const RunStats s = time_runs(opt.n_warmup, opt.mem_runs, [&] {
    pool.parallel_for(n_threads, [&](int64_t t) { pass(static_cast<int>(t), n_threads); });
  });
  return rates(bytes_per_pass, s);
}

Rate measure_memory(ThreadPool& pool, double bytes_per_pass, const std::function<void(int, int)>& pass,
                    const PeakOptions& opt) {
  Rate r;
  r.available = true;
  std::tie(r.one_thread, r.one_thread_best) = memory_rate(pool, 1, bytes_per_pass, pass, opt);
  std::tie(r.all_threads, r.all_threads_best) =
      memory_rate(pool, pool.n_threads(), bytes_per_pass, pass, opt);
  return r;
}

struct MemoryLoops {
  const char* isa;
  double (*read_sum)(const float*, int64_t);
  void (*copy)(const float*, float*, int64_t);
  void (*triad)(float*, const float*, const float*, float, int64_t);
};

MemoryLoops best_memory_loops(const CpuFeatures& cpu) {
  if (cpu.avx512) return {"avx512", loops::read_sum_avx512, loops::copy_avx512, loops::triad_avx512};
  if (cpu.avx2) return {"avx2", loops::read_sum_avx2, loops::copy_avx2, loops::triad_avx2};
  return {"baseline", loops::read_sum_baseline, loops::copy_baseline, loops::triad_baseline};
}

void measure_memory_peaks(ThreadPool& pool, MachinePeaks& p) {
  const PeakOptions& opt = p.options;
  const int64_t n = std::max<int64_t>(opt.mem_bytes / 4, 3 * 64);
  AlignedBuffer<float> buf(static_cast<size_t>(n));
  float* data = buf.data();
  // First touch from the threads that will read it (placement on NUMA machines), and values
  // that keep every sum finite.
  pool.parallel_for(pool.n_threads(), [&](int64_t t) {
    const auto [b, e] = share(n, static_cast<int>(t), pool.n_threads());
    std::fill(data + b, data + e, 1.0f);
  });
  const MemoryLoops ml = best_memory_loops(p.cpu);
  p.mem_isa = ml.isa;
  const double read_bytes = static_cast<double>(n) * 4;
  std::vector<double> sink(static_cast<size_t>(pool.n_threads()));
  p.read_gbps = measure_memory(
      pool, read_bytes,
      [&](int t, int nt) {
        const auto [b, e] = share(n, t, nt);
        sink[static_cast<size_t>(t)] = ml.read_sum(data + b, e - b);
      },
      opt);
  p.read_baseline_gbps = measure_memory(
      pool, read_bytes,
      [&](int t, int nt) {
        const auto [b, e] = share(n, t, nt);
        sink[static_cast<size_t>(t)] = loops::read_sum_baseline(data + b, e - b);
      },
      opt);
  if (!opt.copy_and_triad) {
    p.copy_gbps = unavailable("skipped");
    p.triad_gbps = unavailable("skipped");
    return;
  }
  const int64_t half = n / 2 / 64 * 64;
  p.copy_gbps = measure_memory(
      pool, static_cast<double>(half) * 8,
      [&](int t, int nt) {
        const auto [b, e] = share(half, t, nt);
        ml.copy(data + b, data + half + b, e - b);
      },
      opt);
  const int64_t third = n / 3 / 64 * 64;
  p.triad_gbps = measure_memory(
      pool, static_cast<double>(third) * 12,
      [&](int t, int nt) {
        const auto [b, e] = share(third, t, nt);
        ml.triad(data + b, data + third + b, data + 2 * third + b, 0.5f, e - b);
      },
      opt);
}

void measure_compute_peaks(ThreadPool& pool, MachinePeaks& p) {
  const PeakOptions& opt = p.options;
  const CpuFeatures& cpu = p.cpu;
  // Accumulators converge (a < 1) so no loop ever reaches inf or denormals.
  const float a = 0.999f, b = 0.001f;
  const uint16_t one_bf16 = f32_to_bf16(1.0f), small_bf16 = f32_to_bf16(1e-3f);
  AlignedBuffer<uint16_t> w_f16(loops::kWidenZmmBlockElems), w_bf16(loops::kWidenZmmBlockElems);
  for (size_t i = 0; i < w_f16.size(); ++i) {
    w_f16[i] = f32_to_f16(0.25f + 0.001f * static_cast<float>(i));
    w_bf16[i] = f32_to_bf16(0.25f + 0.001f * static_cast<float>(i));
  }
  const float x = 1e-3f;

  if (cpu.avx512) {
    p.fp32_fma_avx512_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::fma_f32_avx512(it, a, b); }, loops::kFmaF32Zmm_FlopsPerIter,
        opt);
    p.bf16_widen_fma_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::bf16_widen_fma_avx512(it, w_bf16.data(), x); },
        loops::kWidenFmaZmm_FlopsPerIter, opt);
    p.f16c_fma_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::f16c_fma_avx512(it, w_f16.data(), x); },
        loops::kWidenFmaZmm_FlopsPerIter, opt);
    p.f16c_fma_gflops.note = "vcvtph2ps zmm + vfmadd231ps";
  } else {
    p.fp32_fma_avx512_gflops = unavailable("n/a (no AVX-512)");
    p.bf16_widen_fma_gflops = unavailable("n/a (no AVX-512)");
  }
  if (cpu.avx2) {
    p.fp32_fma_avx2_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::fma_f32_avx2(it, a, b); }, loops::kFmaF32Ymm_FlopsPerIter, opt);
    if (!cpu.avx512) {
      p.f16c_fma_gflops = measure_compute(
          pool, [&](int64_t it) { return loops::f16c_fma_avx2(it, w_f16.data(), x); },
          loops::kWidenFmaYmm_FlopsPerIter, opt);
      p.f16c_fma_gflops.note = "vcvtph2ps ymm + vfmadd231ps";
    }
  } else {
    p.fp32_fma_avx2_gflops = unavailable("n/a (no AVX2/FMA)");
    if (!cpu.avx512) p.f16c_fma_gflops = unavailable("n/a (no F16C)");
  }
  if (cpu.avx512_fp16 && loops::avx512fp16_loop_compiled()) {
    const uint16_t ha = f32_to_f16(a), hb = f32_to_f16(b);
    p.fp16_fma_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::fma_f16_avx512fp16(it, ha, hb); },
        loops::kFmaF16Zmm_FlopsPerIter, opt);
  } else if (cpu.avx512_fp16) {
    p.fp16_fma_gflops = unavailable("n/a (this build cannot target AVX512-FP16)");
  } else {
    p.fp16_fma_gflops = unavailable("n/a (no AVX512-FP16)");
  }
  if (cpu.avx512_bf16) {
    p.bf16_dot_gflops = measure_compute(
        pool, [&](int64_t it) { return loops::dot_bf16_avx512(it, one_bf16, small_bf16); },
        loops::kDotBf16Zmm_FlopsPerIter, opt);
  } else {
    p.bf16_dot_gflops = unavailable("n/a (no AVX512-BF16)");
  }
  if (cpu.avx512_vnni) {
    p.int8_vnni_gops = measure_compute(
        pool, [&](int64_t it) { return static_cast<double>(loops::dot_u8s8_avx512(it, 3, -2)); },
        loops::kDotU8S8Zmm_OpsPerIter, opt);
  } else {
    p.int8_vnni_gops = unavailable("n/a (no AVX512-VNNI)");
  }
}

std::string rate_cell(const Rate& r, bool all) {
  if (!r.available) return "-";
  return fmt::format("{:.1f} ({:.1f})", all ? r.all_threads : r.one_thread,
                     all ? r.all_threads_best : r.one_thread_best);
}

// Ratio of the best runs (the least disturbed by other processes).
std::string ratio_cell(const Rate& num, const Rate& den, bool all) {
  if (!num.available || !den.available) return "n/a";
  const double d = all ? den.all_threads_best : den.one_thread_best;
  return d > 0 ? fmt::format("{:.2f}x", (all ? num.all_threads_best : num.one_thread_best) / d) : "n/a";
}

}  // namespace

PeakOptions quick_peak_options() {
  PeakOptions o;
  o.mem_bytes = int64_t{256} << 20;
  o.mem_runs = 9;
  o.compute_runs = 11;
  o.copy_and_triad = false;
  return o;
}

MachinePeaks measure_peaks(int n_threads) { return measure_peaks(n_threads, PeakOptions{}); }

MachinePeaks measure_peaks(int n_threads, const PeakOptions& options) {
  MachinePeaks p;
  p.cpu = detect_cpu_features();
  p.n_threads = std::max(1, n_threads);
  p.options = options;
  p.options.mem_runs = std::max(1, p.options.mem_runs);
  p.options.compute_runs = std::max(1, p.options.compute_runs);
  ThreadPool pool(p.n_threads);
  measure_memory_peaks(pool, p);
  measure_compute_peaks(pool, p);
  return p;
}

std::string format_peaks_table(const MachinePeaks& p) {
  std::string s;
  s += fmt::format("CPU: {}  [{}]\n{}\n", p.cpu.brand, p.cpu.summary(), format_host_load(read_host_load()));
  s += fmt::format(
      "threads: 1 and {}; {} warm-up run(s); memory: {} passes over {} MiB ({} loop); compute: {} runs "
      "of ~{:.0f} ms\n",
      p.n_threads, p.options.n_warmup, p.options.mem_runs, p.options.mem_bytes >> 20, p.mem_isa,
      p.options.compute_runs, p.options.compute_seconds_per_run * 1e3);
  s += "cells: median (best run); ratios and rooflines use the best run\n";
  s += fmt::format("{:<44} {:>16} {:>16}  {}\n", "peak", "1 thread", fmt::format("{} threads", p.n_threads),
                   "unit / note");
  auto row = [&](const char* name, const Rate& r, const char* unit) {
    s += fmt::format("{:<44} {:>16} {:>16}  {}{}{}\n", name, rate_cell(r, false), rate_cell(r, true), unit,
                     r.note.empty() ? "" : "  ", r.note);
  };
  row("memory read (sum, STREAM-like)", p.read_gbps, "GB/s");
  row("memory read, baseline x86-64 loop", p.read_baseline_gbps, "GB/s");
  row("memory copy (STREAM bytes)", p.copy_gbps, "GB/s");
  row("memory triad (STREAM bytes)", p.triad_gbps, "GB/s");
  row("fp32 FMA, AVX-512 (vfmadd231ps zmm)", p.fp32_fma_avx512_gflops, "GFLOP/s");
  row("fp32 FMA, AVX2 (vfmadd231ps ymm)", p.fp32_fma_avx2_gflops, "GFLOP/s");
  row("fp16 FMA (vfmadd231ph zmm)", p.fp16_fma_gflops, "GFLOP/s");
  row("fp16 practical: F16C convert + fp32 FMA", p.f16c_fma_gflops, "GFLOP/s");
  row("bf16 practical: widen (shift) + fp32 FMA", p.bf16_widen_fma_gflops, "GFLOP/s");
  row("bf16 dot (vdpbf16ps zmm, 64 FLOP/instr)", p.bf16_dot_gflops, "GFLOP/s");
  row("int8 dot (vpdpbusd zmm, 128 op/instr)", p.int8_vnni_gops, "GOP/s");
  const Rate& fma = p.fp32_fma_gflops();
  s += "\nratios to the fp32 FMA peak (same thread count, best runs):\n";
  auto ratio = [&](const char* name, const Rate& r) {
    s += fmt::format("  {:<42} {:>8} {:>8}\n", name, ratio_cell(r, fma, false), ratio_cell(r, fma, true));
  };
  ratio("fp32 FMA AVX2 / fp32 FMA AVX-512", p.fp32_fma_avx2_gflops);
  ratio("fp16 FMA / fp32 FMA", p.fp16_fma_gflops);
  ratio("F16C + FMA / fp32 FMA", p.f16c_fma_gflops);
  ratio("bf16 widen + FMA / fp32 FMA", p.bf16_widen_fma_gflops);
  ratio("bf16 dot / fp32 FMA", p.bf16_dot_gflops);
  ratio("int8 VNNI / fp32 FMA", p.int8_vnni_gops);
  s += fmt::format("  {:<42} {:>8} {:>8}\n", "memory read: all threads / 1 thread", "",
                   p.read_gbps.one_thread_best > 0
                       ? fmt::format("{:.2f}x", p.read_gbps.all_threads_best / p.read_gbps.one_thread_best)
                       : "n/a");
  // Machine balance: FLOPs the cores can do per byte read from DRAM; kernels below it are
  // bandwidth-bound (decode GEMV), above it compute-bound (prefill GEMM).
  if (fma.available && p.read_gbps.all_threads_best > 0) {
    s += fmt::format("  {:<42} {:>8.1f} {:>8.1f}\n", "machine balance (fp32 FLOP per byte read)",
                     fma.one_thread_best / p.read_gbps.one_thread_best,
                     fma.all_threads_best / p.read_gbps.all_threads_best);
  }
  return s;
}

std::string format_roofline_line(const MachinePeaks& p) {
  const Rate& fma = p.fp32_fma_gflops();
  std::string s = fmt::format(
      "roofline peaks (this run, best runs): read {:.1f} GB/s (1 thr) / {:.1f} GB/s ({} thr); "
      "fp32 FMA {:.1f} / {:.1f} GFLOP/s",
      p.read_gbps.one_thread_best, p.read_gbps.all_threads_best, p.n_threads, fma.one_thread_best,
      fma.all_threads_best);
  // Separate cores each have their own FMA units, so the all-thread compute peak should be close
  // to n x the one-thread peak; when it is not, no run had all cores at once (busy host).
  if (p.n_threads > 1 && fma.one_thread_best > 0 &&
      fma.all_threads_best < 0.75 * p.n_threads * fma.one_thread_best) {
    s += fmt::format(
        "\nnote: the {}-thread FMA runs reached only {:.2f}x the 1-thread peak (busy host or SMT siblings); "
        "the {}-thread FMA roofline uses {} x the 1-thread peak = {:.1f} GFLOP/s",
        p.n_threads, fma.all_threads_best / fma.one_thread_best, p.n_threads, p.n_threads,
        p.fp32_fma_roofline_gflops(p.n_threads));
  }
  return s;
}

}  // namespace ds::bench
