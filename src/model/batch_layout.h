// How the rows of one forward pass are split over sequences: the GEMMs see all rows concatenated,
// attention runs per chunk against that chunk's blocks of the paged latent cache.
#pragma once

#include <cstdint>
#include <span>

#include "model/kv_cache.h"

namespace ds {

// Rows [row_begin, row_begin + n_rows) of the batch are one sequence's tokens at positions
// pos_begin, pos_begin + 1, ...
struct SeqChunk {
  int64_t row_begin = 0;
  int64_t n_rows = 0;
  int64_t pos_begin = 0;
};

// What one attention layer needs: the chunks, each row's absolute position, each chunk's block
// table, and this layer's slot of the cache. block_tables[i] belongs to chunks[i] and has been
// validated (BlockUseCheck): it covers positions [0, pos_begin + n_rows) with ids inside the slot,
// and the blocks the chunk writes are used by no other chunk.
struct AttentionBatch {
  std::span<const SeqChunk> chunks;
  const int32_t* pos = nullptr;  // [n_rows]
  std::span<const int32_t* const> block_tables;
  LatentLayerView cache;
  int64_t n_rows = 0;
};

}  // namespace ds
