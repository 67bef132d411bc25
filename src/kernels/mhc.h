// V4's manifold-constrained hyper-connection (mHC) row kernels (model/v4_mhc.h holds the model
// logic: the coefficients' sigmoids and Sinkhorn rounds). All arithmetic is f64 with one rounding
// per output; every Isa gives the same bits (exact semantics in kernels/ref/ops_ref.h): the vector
// paths keep each sum's index order and vectorise across independent outputs.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

// mixes[o] = (Σ_i fn_t[i·n_out + o]·v[i]) · rho, rho = 1 / sqrt(Σ_i v[i]² / n + eps), o < n_out,
// i < n (fn_t: the mixing matrix transposed, [n, n_out]).
void mhc_mix(Isa isa, const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes);

// x[c] = round(Σ_k pre[k]·streams[k·hidden + c]), k < hc, c < hidden: the streams' weighted collapse.
void mhc_collapse(Isa isa, const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x);

// out[j·hidden + c] = round(post[j]·f[c] + Σ_i comb[i·hc + j]·streams[i·hidden + c]): the sublayer
// output f written back into hc streams. out must not alias streams.
void mhc_expand(Isa isa, const float* streams, const float* f, const double* post, const double* comb,
                int64_t hc, int64_t hidden, bool to_bf16, float* out);

}  // namespace ds
