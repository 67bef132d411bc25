// Scalar references for the elementwise/row kernels (norm, rope, activation, softmax, top-k).
// These define the semantics; the x86 paths are tested against them. Plain loops, f32, no FMA
// (src/kernels/CMakeLists.txt compiles ref/ with -ffp-contract=off so a*b+c is never fused).
#pragma once

#include <cstdint>

namespace ds::ref {

// Sum of squares in f64 (order-insensitive to f32 precision), r = (float)(1/sqrt(mean + eps)),
// y = (x · r) · w in f32.
void rmsnorm(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps, float* y,
             int64_t ldy);

// V4's RMSNorm: sum of squares in f64 in index order, inv = 1/sqrt(sum/dim + eps) in f64, then
// y = w·(x·inv) in f64 rounded once: to bf16 (ties to even, through f32 rounded to odd, as
// tensor/dtype.h's round_to_bf16(double)) when to_bf16, else to f32. x, y: [n_rows, dim]
// contiguous, not aliased. The vector paths keep the index-order sum (it decides inv's last bits)
// and vectorise the f64 scaling and rounding, so every path gives the same bits.
void rmsnorm_f64(const float* x, int64_t n_rows, int64_t dim, const float* w, double eps, bool to_bf16,
                 float* y);

// Rotation with a precomputed per-token table (see rope_cos_sin in rope.h):
//   re' = re·cos − im·sin, im' = re·sin + im·cos (f32 products and sums, no FMA).
void rope_rotate(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                 int64_t n_pairs);

// out = silu(g)·u with silu(g) = g / (1 + expf(−g)); limit > 0 clamps first (NaN passes through).
void silu_mul(const float* gate, const float* up, int64_t n, float* out, float limit);

// Max, expf(x − max), sum in f64, multiply by (float)(1/sum). All −inf → zeros.
void softmax(float* x, int64_t n);

void topk(const float* scores, int64_t n, int64_t k, int32_t* out_idx, float* out_val);

}  // namespace ds::ref
