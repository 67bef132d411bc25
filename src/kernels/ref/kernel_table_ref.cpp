// The reference path's kernel table: the scalar definitions every vector path is tested against.
#include "kernels/kernel_table.h"
#include "kernels/matmul_bf16x.h"
#include "kernels/ref/attention_ref.h"
#include "kernels/ref/matmul_ref.h"
#include "kernels/ref/ops_ref.h"
#include "kernels/ref/v4_attention_ref.h"
#include "kernels/ref/v4_rows_ref.h"

namespace ds {
namespace {

void matmul_cols_bf16x_reference(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  matmul_cols_with_bf16_x(matmul_cols_ref, args, n_begin, n_end);
}

void sparse_attention_heads_ref(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                                float* scratch) {
  for (int32_t h = h_begin; h < h_end; ++h) ref::sparse_attention_head(a, i, h, scratch);
}

// Constant-initialised: no code runs to build it (none compiled with this path's flags).
constexpr KernelTable kTable{
    .isa = Isa::reference,
    .matmul_cols = matmul_cols_ref,
    .matmul_cols_bf16x = matmul_cols_bf16x_reference,
    .round_rows_bf16 = round_rows_to_bf16_scalar,
    .rmsnorm = ref::rmsnorm,
    .rmsnorm_f64 = ref::rmsnorm_f64,
    .mhc_mix = ref::mhc_mix,
    .mhc_collapse = ref::mhc_collapse,
    .mhc_expand = ref::mhc_expand,
    .rope_rotate = ref::rope_rotate,
    .silu_mul = ref::silu_mul,
    .softmax = ref::softmax,
    .mla_attention_absorbed = ref::mla_attention_absorbed,
    .mha_attention = ref::mha_attention,
    .hadamard_rows = ref::hadamard_rows,
    .quant_sim_rows = ref::quant_sim_rows,
    .compressor_entry = ref::compressor_entry,
    .indexer_scores_range = ref::indexer_scores_range,
    .sparse_attention_heads = sparse_attention_heads_ref,
};

}  // namespace

const KernelTable& reference_kernel_table() { return kTable; }

}  // namespace ds
