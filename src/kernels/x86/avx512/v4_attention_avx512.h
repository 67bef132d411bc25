// AVX-512 work units of the V4 compressor, indexer scoring and sparse attention (contracts in
// kernels/compressor.h, indexer.h, sparse_attention.h; shared code in x86/v4_attention_impl.h).
// Compiled with AVX-512 flags: call only when isa_supported(Isa::avx512).
#pragma once

#include <cstdint>

#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/sparse_attention.h"

namespace ds::avx512 {

void compressor_entry(const CompressorArgs& a, int64_t entry);
// scores_row[t] for t in [t_begin, t_end) of query i.
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end, float* scores_row);
// out[i, h, :] for h in [h_begin, h_end); scratch: 4 · (window.n_idx + compressed.n_idx) floats.
void sparse_attention_heads(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                            float* scratch);

}  // namespace ds::avx512
