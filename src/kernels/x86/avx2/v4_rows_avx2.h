// AVX2 paths of the V4 row transforms; same contracts as kernels/hadamard.h and
// kernels/quant_sim.h (bit-identical to kernels/ref/v4_rows_ref.h).
// Compiled with AVX2 flags: call only when isa_supported(Isa::avx2).
#pragma once

#include <cstdint>

#include "kernels/quant_sim.h"

namespace ds::avx2 {

// n: a power of two >= 8.
void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale);
// spec.block: a multiple of 8.
void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec);

}  // namespace ds::avx2
