// AVX-512 instantiation of x86/v4_attention_impl.h (16 f32 lanes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/x86/avx512/v4_attention_avx512.h"

#include "kernels/x86/avx512/vec_avx512.h"
#include "kernels/x86/v4_attention_impl.h"

namespace ds::avx512 {
void compressor_entry(const CompressorArgs& a, int64_t entry) { x86_v4::compressor_entry<Vec16>(a, entry); }
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                          float* scores_row) {
  x86_v4::indexer_scores_range<Vec16>(a, i, t_begin, t_end, scores_row);
}
void sparse_attention_heads(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                            float* scratch) {
  x86_v4::sparse_attention_heads<Vec16>(a, i, h_begin, h_end, scratch);
}

}  // namespace ds::avx512
