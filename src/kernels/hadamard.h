// Fast Walsh-Hadamard transform of rows (V4 indexer queries and keys before their FP4
// simulation, V3.2 indexer; the official code's `hadamard_transform(x, scale=n^-1/2)`).
//
// y = scale · H_n · x with H_n the Sylvester (natural-order) Hadamard matrix,
// H[i][j] = (-1)^popcount(i & j). Computed in place by the standard butterfly: for
// h = 1, 2, 4, ..., n/2, each pair (a = x[j], b = x[j + h]) with j & h == 0 becomes (a + b, a − b);
// then every element is multiplied by scale once. Every path performs exactly these f32
// operations (each butterfly output is one add or subtract of the same two inputs), so all paths
// are bit-identical to the reference and each row is independent of the others.
#pragma once

#include <cstdint>

#include "kernels/isa.h"

namespace ds {

// x: [n_rows, n] with row stride ld (elements). n must be a power of two (1 is allowed).
void hadamard_rows(Isa isa, float* x, int64_t n_rows, int64_t n, int64_t ld, float scale);

// Scale of the V4 / V3.2 rotation: n^-1/2 (128^-1/2 for the 128-d indexer heads), in f32.
float hadamard_default_scale(int64_t n);

}  // namespace ds
