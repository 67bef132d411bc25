// Scalar references of the V4 row transforms (kernels/hadamard.h, kernels/quant_sim.h): the
// definitions the x86 paths are tested against, bit for bit.
#pragma once

#include <cstdint>

#include "kernels/quant_sim.h"

namespace ds::ref {

void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale);

// Grid rounding written independently of the vector paths: fp8 through tensor/dtype.h's exact
// f32 -> E4M3 conversion, fp4 by nearest value in the E2M1 table with ties to the even code.
float quant_grid_round(QuantGrid grid, float q);

void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec);

}  // namespace ds::ref
