#include "model/v4_kv_state.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace ds {

void V4CompressorState::reset(int32_t ratio_tokens, int64_t width_channels, bool with_overlap) {
  ratio = ratio_tokens;
  overlap = with_overlap;
  width = width_channels;
  kv.assign(static_cast<size_t>(rows() * width), 0.0f);
  score.assign(static_cast<size_t>(rows() * width), -std::numeric_limits<float>::infinity());
}

void V4LayerState::reset(int32_t window_tokens, int64_t head_dim_channels, int32_t ratio, bool overlap,
                         bool index_compressor, int64_t index_dim) {
  window = window_tokens;
  head_dim = head_dim_channels;
  ring_kv.assign(static_cast<size_t>(window * head_dim), 0.0f);
  ring_pos.assign(static_cast<size_t>(window), -1);
  n_entries = 0;
  n_idx_keys = 0;
  if (ratio > 0) comp.reset(ratio, (overlap ? 2 : 1) * head_dim, overlap);
  if (index_compressor) idx_comp.reset(ratio, 2 * index_dim, true);
}

void V4EntryPages::write(int64_t first, int64_t n, const float* src) const {
  const int64_t per_block = view.block_size;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = first + i;
    float* row = view.block(block_table[j / per_block]) + (j % per_block) * view.row_dim;
    std::copy_n(src + i * view.row_dim, view.row_dim, row);
  }
}

}  // namespace ds
