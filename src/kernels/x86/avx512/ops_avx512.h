// AVX512 paths of the row kernels; same contracts as kernels/ref/ops_ref.h.
// Compiled with AVX512 flags: call only when isa_supported(Isa::avx512).
#pragma once

#include <cstdint>

namespace ds::avx512 {

void rmsnorm(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps, float* y,
             int64_t ldy);
void rmsnorm_f64(const float* x, int64_t n_rows, int64_t dim, const float* w, double eps, bool to_bf16,
                 float* y);
void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes);
void mhc_collapse(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x);
void mhc_expand(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                int64_t hidden, bool to_bf16, float* out);
void rope_rotate(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                 int64_t n_pairs);
void silu_mul(const float* gate, const float* up, int64_t n, float* out, float limit);
void softmax(float* x, int64_t n);

// y = e^x elementwise with this path's polynomial (the one softmax, silu_mul and attention use),
// exposed so tests can measure its accuracy: Cody-Waite reduction to r ∈ [−ln2/2, ln2/2], Cephes'
// degree-7 polynomial, exact scaling by 2^n (overflow → +inf, underflow through subnormals → 0,
// NaN → NaN). x == y is allowed.
void exp_f32(const float* x, int64_t n, float* y);

}  // namespace ds::avx512
