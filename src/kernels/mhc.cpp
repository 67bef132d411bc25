#include "kernels/mhc.h"

#include "kernels/kernel_table.h"

namespace ds {

void mhc_mix(Isa isa, const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps,
             double* mixes) {
  if (n_out <= 0) return;
  kernel_table(isa).mhc_mix(fn_t, n, n_out, v, eps, mixes);
}

void mhc_collapse(Isa isa, const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x) {
  if (hidden <= 0) return;
  kernel_table(isa).mhc_collapse(streams, hc, hidden, pre, to_bf16, x);
}

void mhc_expand(Isa isa, const float* streams, const float* f, const double* post, const double* comb,
                int64_t hc, int64_t hidden, bool to_bf16, float* out) {
  if (hidden <= 0 || hc <= 0) return;
  kernel_table(isa).mhc_expand(streams, f, post, comb, hc, hidden, to_bf16, out);
}

}  // namespace ds
