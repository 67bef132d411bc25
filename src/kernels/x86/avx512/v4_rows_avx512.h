// AVX-512 paths of the V4 row transforms; same contracts as kernels/hadamard.h and
// kernels/quant_sim.h (bit-identical to kernels/ref/v4_rows_ref.h).
// Compiled with AVX-512 flags: call only when isa_supported(Isa::avx512).
#pragma once

#include <cstdint>

#include "kernels/quant_sim.h"

namespace ds::avx512 {

// n: a power of two >= 16.
void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale);
// spec.block: a multiple of 16.
void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec);

}  // namespace ds::avx512
