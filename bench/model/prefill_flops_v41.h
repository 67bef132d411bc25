// Prefill FLOPs of a DeepSeek-V4.1 checkpoint with and without decoder-side SWA bounded replay
// (model/decoder_replay.h), layer by layer, from the tensors as stored (active_weights.h's
// TensorInfo) and the layer roles (weights/layer_spec.h). For a prompt of P tokens whose decoder
// layers (from the first decoder layer `split` on) run on the last R rows (R = P: exact):
//   matmuls   2 · params_l · rows_l, rows_l = P before split, R from it, except the split layer's
//             compressor and index-key projection (attn.compressor.*, attn.indexer.wk), which see
//             all P rows; routed experts count k / E of their weights; Engram's projection per row
//   attention per row at position p: 4 · H · D per attended key, keys = the window
//             min(W, p − start + 1) (start = the cut in the decoder, 0 before) + for a compressed
//             layer min(index_topk, n_c), n_c = (p + 1) / ratio; an index source also scores n_c
//             keys at 2 · index_heads · index_dim each
//   head      2 · head params for the one row whose logits a prefill needs.
#pragma once

#include <cstdint>
#include <vector>

#include "active_weights.h"
#include "weights/layer_spec.h"

namespace ds::bench {

struct V41PrefillFlops {
  double encoder = 0;  // layers before split (matmuls + attention)
  double source = 0;   // the split layer's compressor + index keys over all P rows
  double decoder = 0;  // layers from split on, on their rows (matmuls + attention)
  double head = 0;
  double total() const { return encoder + source + decoder + head; }
};

// split: the first decoder layer (decoder_first_layer), -1 = none (everything is "encoder").
V41PrefillFlops v41_prefill_flops(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg,
                                  const std::vector<LayerSpec>& specs, int split, int64_t prompt_len,
                                  int64_t decoder_rows);

}  // namespace ds::bench
