// y = x · Wᵀ for a linear layer: x [m, cols] f32, W [rows, cols] in its stored format, y [m, rows] f32.
//
// Batch invariance (ARCHITECTURE "by construction"): y[i, n] is produced by the same sequence of
// floating-point operations whatever m is, wherever row i sits, and however many threads run.
// There is no split-K; threads split the output columns n only; each ISA path has one fixed
// lane partition and reduction order for the dot product over cols.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/isa.h"
#include "tensor/weight_matrix.h"

namespace ds {

struct MatmulArgs {
  const float* x = nullptr;  // [m, w.cols], row stride ldx (elements)
  int64_t m = 0;
  int64_t ldx = 0;
  const WeightMatrix* w = nullptr;
  float* y = nullptr;  // [m, w.rows], row stride ldy (elements)
  int64_t ldy = 0;
};

// Multithreaded over output columns. Precondition: w.cols % 16 == 0 for the vector paths
// (the reference path takes any shape); x and y must not overlap.
void matmul(Isa isa, ThreadPool& pool, const MatmulArgs& args);

// Single-threaded, output columns [n_begin, n_end) only (building block; also used by the MoE
// code to run one expert on one thread).
void matmul_cols(Isa isa, const MatmulArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace ds
