// Scalar references of the V4 attention-side kernels (kernels/compressor.h, indexer.h,
// sparse_attention.h), one work unit per call; the dispatchers split units over threads.
// Plain loops, f32, no FMA contraction (the build is -std=c++20).
#pragma once

#include <cstdint>

#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/sparse_attention.h"

namespace ds::ref {

// out row `entry`, all d_c channels.
void compressor_entry(const CompressorArgs& a, int64_t entry);

// scores_row[t] = I_t for t in [t_begin, t_end) (query i).
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end, float* scores_row);

// out[i, h, :]. scratch: at least window.n_idx + compressed.n_idx floats.
void sparse_attention_head(const SparseAttentionArgs& a, int64_t i, int32_t h, float* scratch);

}  // namespace ds::ref
