// How the rows of one forward pass are split over sequences: the GEMMs see all rows concatenated,
// attention runs per chunk against that chunk's sequence cache.
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

// What one attention layer needs: the chunks, each row's absolute position, and for each chunk
// the cache this layer appends to (caches[i] belongs to chunks[i]; cache->n_rows() == pos_begin
// on entry).
struct AttentionBatch {
  std::span<const SeqChunk> chunks;
  const int32_t* pos = nullptr;  // [n_rows]
  std::span<LatentCache* const> caches;
  int64_t n_rows = 0;
};

}  // namespace ds
