// Machine peaks measured in the same run as a benchmark, so every kernel and model number can be
// stated as a fraction of what this machine actually does (STYLE habit 14: roofline units).
//
// Units: GB/s = 1e9 bytes per second; GFLOP/s = 1e9 floating-point ops per second, where a
// multiply-add counts as 2; int8 "GOP/s" counts each u8*s8 multiply-add as 2 ops as well.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "machine/cpu_features.h"

namespace ds::bench {

// A rate measured on one thread and on all threads of the pool: the median over the timed runs
// and the best (fastest) run. available == false when the CPU lacks the instructions (note says
// why), in which case every rate is 0.
//
// The benches divide by the best run: on a shared machine other processes can only slow a run
// down, so the fastest run is the closest estimate of what the hardware does, and dividing a
// median by it never overstates a kernel's fraction of peak.
struct Rate {
  bool available = false;
  double one_thread = 0;   // median
  double all_threads = 0;  // median
  double one_thread_best = 0;
  double all_threads_best = 0;
  std::string note;

  // The best rate for a run with n_threads: 1 -> one thread, otherwise all threads (the benches
  // run either single-threaded or on the whole pool the peaks were measured with).
  double peak_at(int n_threads) const { return n_threads <= 1 ? one_thread_best : all_threads_best; }
};

struct PeakOptions {
  int64_t mem_bytes = int64_t{1} << 30;  // STREAM buffer, far beyond any L3
  int mem_runs = 15;                     // timed passes over the buffer (median and best)
  // Compute loops: many short runs, so that on a shared machine some of them fit in one
  // scheduler slice (the best run then shows the undisturbed rate).
  double compute_seconds_per_run = 0.005;
  int compute_runs = 21;
  int n_warmup = 1;
  bool copy_and_triad = true;  // the read rate is the one the rooflines use
};

// Smaller buffer, fewer runs: for --quick and for benches that only need the rooflines.
PeakOptions quick_peak_options();

struct MachinePeaks {
  CpuFeatures cpu;
  int n_threads = 1;
  PeakOptions options;
  std::string mem_isa;  // which loop measured memory: "avx512", "avx2" or "baseline"

  // Memory, GB/s. read: sum over the buffer (the decode roofline). copy/triad: STREAM byte
  // accounting (copy 8 B and triad 12 B per f32 element, write-allocate traffic not counted).
  Rate read_gbps;
  Rate read_baseline_gbps;  // the same sum with baseline x86-64 code (no AVX)
  Rate copy_gbps;
  Rate triad_gbps;

  // Compute, GFLOP/s (GOP/s for int8), registers only (no memory traffic except the widen
  // loops' L1-resident block).
  Rate fp32_fma_avx512_gflops;
  Rate fp32_fma_avx2_gflops;
  Rate fp16_fma_gflops;        // AVX512-FP16 vfmadd231ph
  Rate f16c_fma_gflops;        // practical fp16: vcvtph2ps + fp32 FMA (best ISA)
  Rate bf16_widen_fma_gflops;  // practical bf16: zero-extend + shift + fp32 FMA (AVX-512)
  Rate bf16_dot_gflops;        // vdpbf16ps, 64 FLOPs per zmm instruction
  Rate int8_vnni_gops;         // vpdpbusd, 128 ops per zmm instruction

  // The fp32 FMA peak of the widest ISA the CPU has (the prefill roofline).
  const Rate& fp32_fma_gflops() const {
    return fp32_fma_avx512_gflops.available ? fp32_fma_avx512_gflops : fp32_fma_avx2_gflops;
  }
  // The fp32 FMA roofline for a run on n_threads, GFLOP/s: the best all-thread run, but at least
  // n_threads x the best one-thread run. Cores have their own FMA units, and on a busy host the
  // all-thread runs rarely get every core at once; the larger value never overstates a kernel's
  // fraction (with SMT siblings it understates it).
  double fp32_fma_roofline_gflops(int n_threads) const {
    const Rate& r = fp32_fma_gflops();
    if (n_threads <= 1) return r.one_thread_best;
    return std::max(r.all_threads_best, n_threads * r.one_thread_best);
  }
  // The same for the bf16 dot product (vdpbf16ps), the peak of the bf16-activation GEMM; 0 where
  // the CPU has no AVX512_BF16.
  double bf16_dot_roofline_gflops(int n_threads) const {
    const Rate& r = bf16_dot_gflops;
    if (!r.available) return 0;
    if (n_threads <= 1) return r.one_thread_best;
    return std::max(r.all_threads_best, n_threads * r.one_thread_best);
  }
};

// Measures every peak above with a pool of n_threads (>= 1) threads; takes a few seconds.
MachinePeaks measure_peaks(int n_threads);
MachinePeaks measure_peaks(int n_threads, const PeakOptions& options);

// The human-readable table (one line per peak, 1-thread and all-thread columns) and the
// ratios between the compute peaks.
std::string format_peaks_table(const MachinePeaks& peaks);
// One line with the two roofline peaks, for the other benches' headers.
std::string format_roofline_line(const MachinePeaks& peaks);

}  // namespace ds::bench
