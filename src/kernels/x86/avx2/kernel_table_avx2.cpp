// The avx2 path's kernel table. Compiled with avx2 flags, but building the table runs no vector
// instruction (it is constant-initialised); its entries run only where isa_supported(Isa::avx2).
#include "kernels/kernel_table.h"
#include "kernels/matmul_bf16x.h"
#include "kernels/ref/v4_rows_ref.h"
#include "kernels/x86/avx2/attention_avx2.h"
#include "kernels/x86/avx2/matmul_avx2.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx2/v4_attention_avx2.h"
#include "kernels/x86/avx2/v4_rows_avx2.h"

namespace ds {
namespace {

void matmul_cols_bf16x_avx2(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  matmul_cols_with_bf16_x(matmul_cols_avx2, args, n_begin, n_end);
}

constexpr int64_t kLanes = 8;

// Rows shorter than a vector, and quantisation blocks that are not whole vectors, take the
// reference (bit-identical by contract).
void hadamard_rows_avx2(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  if (n >= kLanes) return avx2::hadamard_rows(x, n_rows, n, ld, scale);
  ref::hadamard_rows(x, n_rows, n, ld, scale);
}

void quant_sim_rows_avx2(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  if (spec.block % kLanes == 0) return avx2::quant_sim_rows(x, n_rows, n, ld, spec);
  ref::quant_sim_rows(x, n_rows, n, ld, spec);
}

// Constant-initialised: no code runs to build it (none compiled with this path's flags).
constexpr KernelTable kTable{
    .isa = Isa::avx2,
    .matmul_cols = matmul_cols_avx2,
    .matmul_cols_bf16x = matmul_cols_bf16x_avx2,
    .round_rows_bf16 = round_rows_to_bf16_scalar,
    .gemm_tile_m = kAvx2TileM,
    .gemm_tile_n = kAvx2TileN,
    .gemv_tile_n = kAvx2GemvTileN,
    .rmsnorm = avx2::rmsnorm,
    .rmsnorm_f64 = avx2::rmsnorm_f64,
    .mhc_mix = avx2::mhc_mix,
    .mhc_collapse = avx2::mhc_collapse,
    .mhc_expand = avx2::mhc_expand,
    .rope_rotate = avx2::rope_rotate,
    .silu_mul = avx2::silu_mul,
    .softmax = avx2::softmax,
    .mla_attention_absorbed = avx2::mla_attention_absorbed,
    .mha_attention = avx2::mha_attention,
    .hadamard_rows = hadamard_rows_avx2,
    .quant_sim_rows = quant_sim_rows_avx2,
    .compressor_entry = avx2::compressor_entry,
    .indexer_scores_range = avx2::indexer_scores_range,
    .sparse_attention_heads = avx2::sparse_attention_heads,
};

}  // namespace

const KernelTable& avx2_kernel_table() { return kTable; }

}  // namespace ds
