// y = x · Wᵀ for a linear layer: x [m, cols] f32, W [rows, cols] in its stored format, y [m, rows] f32.
//
// Batch invariance (ARCHITECTURE "by construction"): y[i, n] is produced by the same sequence of
// floating-point operations whatever m is, wherever row i sits, and however many threads run.
// There is no split-K; threads split the output columns n only; each ISA path has one fixed
// lane partition and reduction order for the dot product over cols:
//   reference: one f32 accumulator, k = 0, 1, 2, ... (product rounded, then added);
//   avx2:      8 lanes, lane l accumulates k ≡ l (mod 8) in increasing k with FMA;
//   avx512:    16 lanes, lane l accumulates k ≡ l (mod 16) in increasing k with FMA;
//   then a fixed pairwise horizontal sum (lane l + lane l+half, halving down to one).
// fp4 (a byte holds columns 2k and 2k+1) uses the same lanes and tree but its own column-to-lane
// map, the one in-register nibble decoding gives: with L lanes, column k goes to lane
// (k mod 2L) / 2, still in increasing k (lane l of a 2L-column chunk takes 2l, then 2l+1).
// Vector paths dequantise each weight exactly as the reference does (bf16: exact; fp8: the
// f32 product fp8 · scale, rounded once), so paths differ only in summation order.
// Vector-path fp8 caveats: the NaN codes 0x7f/0xff decode as ±480·scale instead of NaN, and a
// block scale must satisfy |scale| < 2^8 (it is pre-multiplied by 2^120); real FP8 checkpoints
// never use either. fp4 decodes every weight exactly (the f32 product e2m1 · 2^(e-127), as the
// reference; a NaN scale byte 0xff gives NaN weights). The fp8 decode goes through f32 subnormals, so MXCSR
// DAZ must stay off (the default; nothing in this engine sets it).
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
  // Numerics option (docs/numerics.md "bf16 activations"): x is rounded to bf16 (nearest even) and
  // bf16/fp8/fp4 weights are decoded and rounded to bf16 (exact for bf16, fp4 and power-of-two fp8
  // scales; matmul_bf16x.h), their products summed in f32; the AVX-512 path uses vdpbf16ps where
  // the CPU has AVX512_BF16 (lane order in x86/avx512/matmul_bf16dot_avx512.h). f32 weights ignore
  // it. Batch invariant like the default: the choice depends on the option and the format, never on m.
  bool bf16_activations = false;
  // Optional, with bf16_activations: x already rounded to bf16 by round_rows_to_bf16 (row stride
  // w.cols), so a call split over threads or column ranges rounds x once; a path that reads bf16 x
  // reads it instead of rounding x again. Never changes a result.
  const uint16_t* x_bf16 = nullptr;
};

// Multithreaded over output columns. Any shape (m = 0, cols not a multiple of the vector width
// or of the fp8 block); x and y must not overlap. `isa` must be supported by the CPU.
void matmul(Isa isa, ThreadPool& pool, const MatmulArgs& args);

// out[i * cols + k] = bf16(x[i * ldx + k]) (nearest even, NaN kept quiet: tensor/dtype.h's
// f32_to_bf16, bit for bit on every path) for i < m, k < cols: MatmulArgs::x_bf16.
void round_rows_to_bf16(Isa isa, const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out);

// Single-threaded, output columns [n_begin, n_end) only (building block; also used by the MoE
// code to run one expert on one thread).
void matmul_cols(Isa isa, const MatmulArgs& args, int64_t n_begin, int64_t n_end);

// How matmul() runs one call (STYLE habit 10: descriptor -> pure heuristic -> launcher).
// A plan only decides speed, never a result bit: every plan gives the same y.
struct MatmulPlan {
  Isa isa = Isa::reference;
  int tile_m = 1;       // rows of x per register tile (GEMM micro-kernel height; 1 when m == 1)
  int tile_n = 1;       // rows of W per register tile
  int64_t n_grain = 1;  // thread ranges over output columns start at multiples of this
  int n_tasks = 0;      // thread ranges used (1..n_threads; 0 when there is nothing to do)
};

// Pure function of the shape, format, Isa and thread count (w.data is not read).
MatmulPlan plan_matmul(Isa isa, int64_t m, const WeightMatrix& w, int n_threads);

// Output-column range of task `task_idx` under `plan` for a W with `rows` rows; contiguous,
// aligned to plan.n_grain, covering [0, rows) exactly once over all tasks.
struct ColumnRange {
  int64_t begin = 0;
  int64_t end = 0;
};
ColumnRange plan_task_range(const MatmulPlan& plan, int64_t rows, int task_idx);

}  // namespace ds
