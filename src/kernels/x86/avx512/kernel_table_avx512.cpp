// The avx512 path's kernel table. Compiled with avx512 flags, but building the table runs no vector
// instruction (it is constant-initialised); its entries run only where isa_supported(Isa::avx512).
#include "kernels/kernel_table.h"
#include "kernels/ref/v4_rows_ref.h"
#include "kernels/x86/avx512/attention_avx512.h"
#include "kernels/x86/avx512/matmul_avx512.h"
#include "kernels/x86/avx512/matmul_bf16dot_avx512.h"
#include "kernels/x86/avx512/ops_avx512.h"
#include "kernels/x86/avx512/v4_attention_avx512.h"
#include "kernels/x86/avx512/v4_rows_avx512.h"

namespace ds {
namespace {

constexpr int64_t kLanes = 16;

// Rows shorter than a vector, and quantisation blocks that are not whole vectors, take the
// reference (bit-identical by contract).
void hadamard_rows_avx512(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  if (n >= kLanes) return avx512::hadamard_rows(x, n_rows, n, ld, scale);
  ref::hadamard_rows(x, n_rows, n, ld, scale);
}

void quant_sim_rows_avx512(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  if (spec.block % kLanes == 0) return avx512::quant_sim_rows(x, n_rows, n, ld, spec);
  ref::quant_sim_rows(x, n_rows, n, ld, spec);
}

// Constant-initialised: no code runs to build it (none compiled with this path's flags).
constexpr KernelTable kTable{
    .isa = Isa::avx512,
    .matmul_cols = matmul_cols_avx512,
    .matmul_cols_bf16x = matmul_cols_bf16dot_avx512,
    .round_rows_bf16 = round_rows_to_bf16_avx512,
    .gemm_tile_m = kAvx512TileM,
    .gemm_tile_n = kAvx512TileN,
    .gemv_tile_n = kAvx512GemvTileN,
    .rmsnorm = avx512::rmsnorm,
    .rmsnorm_f64 = avx512::rmsnorm_f64,
    .mhc_mix = avx512::mhc_mix,
    .mhc_collapse = avx512::mhc_collapse,
    .mhc_expand = avx512::mhc_expand,
    .rope_rotate = avx512::rope_rotate,
    .silu_mul = avx512::silu_mul,
    .softmax = avx512::softmax,
    .mla_attention_absorbed = avx512::mla_attention_absorbed,
    .mha_attention = avx512::mha_attention,
    .hadamard_rows = hadamard_rows_avx512,
    .quant_sim_rows = quant_sim_rows_avx512,
    .compressor_entry = avx512::compressor_entry,
    .indexer_scores_range = avx512::indexer_scores_range,
    .sparse_attention_heads = avx512::sparse_attention_heads,
};

}  // namespace

const KernelTable& avx512_kernel_table() { return kTable; }

}  // namespace ds
