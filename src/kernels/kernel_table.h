// One function table per instruction-set path: every kernel family's per-ISA work unit, so a
// dispatcher is `kernel_table(isa).f(...)` instead of a `switch (isa)` per family, and a new path
// (AMX, ...) is one folder, one table and one Isa value.
//
// Each entry accepts every input its family's public header allows: where a vector path needs a
// minimum width (hadamard n >= lanes, quant_sim block a multiple of the lanes) its table entry
// falls back to the reference for the rest, exactly as the dispatchers did before the table.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quant_sim.h"
#include "kernels/sparse_attention.h"

namespace ds {

struct KernelTable {
  Isa isa = Isa::reference;

  // matmul.h: single-threaded, output columns [n_begin, n_end); the plan's register tiles.
  void (*matmul_cols)(const MatmulArgs& args, int64_t n_begin, int64_t n_end) = nullptr;
  // MatmulArgs::bf16_activations for bf16 / fp8 / fp4 weights (x and W rounded to bf16: matmul_bf16x.h).
  void (*matmul_cols_bf16x)(const MatmulArgs& args, int64_t n_begin, int64_t n_end) = nullptr;
  // matmul.h's round_rows_to_bf16 (MatmulArgs::x_bf16).
  void (*round_rows_bf16)(const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out) = nullptr;
  int gemm_tile_m = 1;  // rows of x per GEMM tile (m > 1)
  int gemm_tile_n = 1;  // rows of W per GEMM tile (m > 1)
  int gemv_tile_n = 1;  // rows of W per GEMV tile (m == 1)

  // Row kernels (contracts in kernels/ref/ops_ref.h).
  void (*rmsnorm)(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps,
                  float* y, int64_t ldy) = nullptr;
  void (*rmsnorm_f64)(const float* x, int64_t n_rows, int64_t dim, const float* w, double eps, bool to_bf16,
                      float* y) = nullptr;
  void (*mhc_mix)(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps,
                  double* mixes) = nullptr;
  void (*mhc_collapse)(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                       float* x) = nullptr;
  void (*mhc_expand)(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                     int64_t hidden, bool to_bf16, float* out) = nullptr;
  void (*rope_rotate)(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                      int64_t n_pairs) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out, float limit) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;

  // Attention (kernels/attention.h; the paged form only: the dispatcher wraps a flat cache).
  void (*mla_attention_absorbed)(ThreadPool& pool, const MlaAbsorbedArgs& a) = nullptr;
  void (*mha_attention)(ThreadPool& pool, const MhaArgs& a) = nullptr;

  // V4 (kernels/hadamard.h, quant_sim.h, compressor.h, indexer.h, sparse_attention.h).
  void (*hadamard_rows)(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) = nullptr;
  void (*quant_sim_rows)(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) = nullptr;
  void (*compressor_entry)(const CompressorArgs& a, int64_t entry) = nullptr;
  void (*indexer_scores_range)(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                               float* scores_row) = nullptr;
  // out[i, h, :] for h in [h_begin, h_end); scratch: 4 · (window.n_idx + compressed.n_idx) floats.
  void (*sparse_attention_heads)(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                                 float* scratch) = nullptr;
};

// The table of `isa`. Precondition: isa_supported(isa) (calling a vector entry on a CPU without
// the ISA faults).
const KernelTable& kernel_table(Isa isa);

// The per-path tables (defined in ref/, x86/avx2/, x86/avx512/).
const KernelTable& reference_kernel_table();
const KernelTable& avx2_kernel_table();
const KernelTable& avx512_kernel_table();

}  // namespace ds
