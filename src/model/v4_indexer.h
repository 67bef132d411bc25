// The V4 lightning indexer of CSA layers (model-spec §4.5): its own compressor turns every group
// of `ratio` tokens into a 128-d key (Hadamard + FP4); each query (from the shared q_lora state,
// RoPE, Hadamard, FP4) scores the visible keys by Σ_h w_h·ReLU(q_h·k) and the attention keeps the
// top index_topk compressed entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_compressor.h"
#include "model/v4_kv_state.h"
#include "model/v4_numerics.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

class V4Indexer {
 public:
  // `<prefix>{wq_b, weights_proj, compressor.*}` (prefix "layers.N.attn.indexer.").
  // `spec`: the owning layer (its ratio, and index_keys: the keys' and queries' storage).
  static Result<V4Indexer> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                const LayerSpec& spec);

  // Feeds the chunk into the indexer's compressor and writes the keys it completes to `keys` (the
  // sequence's paged indexer keys [n_keys, index_dim]; st.n_idx_keys counts them), then selects
  // for each token t its entries: selected[t] ascending entry ids among the (pos[t] + 1) / ratio
  // visible ones (all of them when at most index_topk are visible). The keys are scored where they
  // lie in the pages (no copy). x: [n, hidden] attention input, qr: [n, q_lora_rank] normed query
  // latent.
  void select(const ForwardContext& ctx, const V4Numerics& num, const float* x, const float* qr, int64_t n,
              const int32_t* pos, const std::vector<float>& inv_freq, V4LayerState& st,
              const V4EntryPages& keys, std::vector<std::vector<int32_t>>& selected) const;

 private:
  int64_t n_heads_ = 0, head_dim_ = 0, rope_dim_ = 0, hidden_ = 0, q_lora_ = 0, top_k_ = 0;
  CacheQuant quant_ = CacheQuant::none;  // keys and queries (LayerSpec::index_keys)
  int32_t ratio_ = 0;
  Linear wq_b_, weights_proj_;
  V4Compressor compressor_;
};

}  // namespace ds
