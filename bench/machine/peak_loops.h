// The inner loops whose rate defines each machine peak, one implementation per ISA
// (x86/avx512/, x86/avx2/, x86/avx512fp16/ compiled with their own flags; baseline here).
//
// Compute loops keep kPeakAccumulators independent accumulator registers so that
// throughput, not the FMA latency (4-6 cycles), is the limit: 2 pipes x 6 cycles = 12 in
// flight at most on current x86 cores, 16 leaves margin and fits in 32 zmm with the inputs.
// Accumulator k starts at k (lane-uniform): identical chains would let the compiler merge them
// into one latency-bound chain. Each loop returns a checksum (the sum of every accumulator lane) so the work
// cannot be removed by the compiler; peaks_test.cpp checks the checksum equals exactly what n_iters
// iterations must produce, which is what pins the op counts (k*OpsPerIter) below.
#pragma once

#include <cstdint>

namespace ds::bench::loops {

inline constexpr int kPeakAccumulators = 16;
// AVX2 has only 16 ymm registers: 16 accumulators plus the inputs would spill, and the
// store-to-load round trips would become the limit. 12 still covers 2 pipes x 5 cycles.
inline constexpr int kPeakAccumulatorsYmm = 12;

// --- op counts per loop iteration (all accumulators together) ---
// fp32 FMA: one vfmadd231ps per accumulator, 2 FLOPs per lane.
inline constexpr int64_t kFmaF32Zmm_FlopsPerIter = kPeakAccumulators * 16 * 2;
inline constexpr int64_t kFmaF32Ymm_FlopsPerIter = kPeakAccumulatorsYmm * 8 * 2;
// fp16 FMA (AVX512-FP16): 32 half lanes per zmm.
inline constexpr int64_t kFmaF16Zmm_FlopsPerIter = kPeakAccumulators * 32 * 2;
// vdpbf16ps: each f32 lane accumulates 2 bf16 products -> 32 multiply-adds = 64 FLOPs per zmm.
inline constexpr int64_t kDotBf16Zmm_FlopsPerIter = kPeakAccumulators * 64;
// vpdpbusd: each i32 lane accumulates 4 u8*s8 products -> 64 multiply-adds = 128 ops per zmm.
inline constexpr int64_t kDotU8S8Zmm_OpsPerIter = kPeakAccumulators * 128;
// Widen-then-FMA paths (F16C vcvtph2ps, or bf16 shift-left-16) from an L1-resident block:
// one load + one convert + one fp32 FMA per accumulator, counted as the fp32 FMA FLOPs.
inline constexpr int64_t kWidenFmaZmm_FlopsPerIter = kPeakAccumulators * 16 * 2;
inline constexpr int64_t kWidenFmaYmm_FlopsPerIter = kPeakAccumulatorsYmm * 8 * 2;
// Halves (or bf16 values) the widen loops read per iteration: w must hold this many.
inline constexpr int64_t kWidenZmmBlockElems = kPeakAccumulators * 16;
inline constexpr int64_t kWidenYmmBlockElems = kPeakAccumulatorsYmm * 8;

// ---- AVX-512 (x86/avx512/peaks_avx512.cpp) ----
// acc = acc * a + b, n_iters times per accumulator lane (acc_k starts at k).
double fma_f32_avx512(int64_t n_iters, float a, float b);
// acc += a*b + a*b (bf16 pairs), inputs as bf16 bit patterns (acc_k starts at k).
double dot_bf16_avx512(int64_t n_iters, uint16_t a_bf16, uint16_t b_bf16);
// acc += 4 * (a * b) in int32 (wrapping), a unsigned, b signed (acc_k starts at k).
int64_t dot_u8s8_avx512(int64_t n_iters, uint8_t a, int8_t b);
// acc_k (from 0) += f32(w[16k .. 16k+15]) * x, w: [kWidenZmmBlockElems] f16 bit patterns.
double f16c_fma_avx512(int64_t n_iters, const uint16_t* w_f16, float x);
// Same with bf16 bit patterns widened by a 16-bit shift (how bf16 weights reach fp32 FMA).
double bf16_widen_fma_avx512(int64_t n_iters, const uint16_t* w_bf16, float x);
// Memory: sum of p[0..n); dst[i] = src[i]; a[i] = b[i] + s * c[i]. Any n (tails scalar).
double read_sum_avx512(const float* p, int64_t n);
void copy_avx512(const float* src, float* dst, int64_t n);
void triad_avx512(float* a, const float* b, const float* c, float s, int64_t n);

// ---- AVX2 + FMA + F16C (x86/avx2/peaks_avx2.cpp) ----
double fma_f32_avx2(int64_t n_iters, float a, float b);
double f16c_fma_avx2(int64_t n_iters, const uint16_t* w_f16, float x);  // w: [kWidenYmmBlockElems]
double read_sum_avx2(const float* p, int64_t n);
void copy_avx2(const float* src, float* dst, int64_t n);
void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n);

// ---- AVX512-FP16 (x86/avx512fp16/peaks_avx512fp16.cpp; a stub returning 0 when the compiler
// cannot target it, and never called unless CPUID reports the extension) ----
// acc = acc * a + b in fp16, inputs as f16 bit patterns.
double fma_f16_avx512fp16(int64_t n_iters, uint16_t a_f16, uint16_t b_f16);
bool avx512fp16_loop_compiled();

// ---- baseline x86-64 (peak_loops_baseline.cpp), the fallback and the untuned reference ----
double read_sum_baseline(const float* p, int64_t n);
void copy_baseline(const float* src, float* dst, int64_t n);
void triad_baseline(float* a, const float* b, const float* c, float s, int64_t n);

}  // namespace ds::bench::loops
