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

// mHC (kernels/mhc.h), f64 throughout, one rounding per output (to bf16 as rmsnorm_f64, or f32):
//   mhc_mix: ss = Σ_i v[i]² (i ascending, v[i]² exact), acc[o] = Σ_i fn_t[i·n_out + o]·v[i] (i ascending,
//     each product rounded, then added to acc starting from +0), mixes[o] = acc[o] · (1 / sqrt(ss / n +
//     eps));
//   mhc_collapse: x[c] = round(Σ_k pre[k]·streams[k·hidden + c]) (k ascending, from +0);
//   mhc_expand: out[j·hidden + c] = round(post[j]·f[c] + acc), acc = Σ_i comb[i·hc + j]·streams[i·hidden + c]
//     (i ascending, from +0).
void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes);
void mhc_collapse(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x);
void mhc_expand(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                int64_t hidden, bool to_bf16, float* out);

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
