// The V4 lightning indexer of CSA layers (model-spec §4.5): its own compressor turns every group
// of `ratio` tokens into a 128-d key (Hadamard + FP4); each query (from the shared q_lora state,
// RoPE, Hadamard, FP4) scores the visible keys by Σ_h w_h·ReLU(q_h·k) and the attention keeps the
// top index_topk compressed entries. V4.1 (§5.5, §5.6): index keys come from the KV source's
// compressed latent (V41IndexKeys), queries have no Hadamard, and the candidate source's score
// rows define a pool of blocks the later index sources select inside.
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
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class V4Indexer {
 public:
  // `<prefix>{wq_b, weights_proj, compressor.*}` (prefix "layers.N.attn.indexer.").
  // `spec`: the owning layer (its ratio, and index_keys: the keys' and queries' storage).
  static Result<V4Indexer> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                const LayerSpec& spec);

  // The per-row projections select() and select_v41() take, over rows [n] of a step (row results
  // do not depend on n, so a step projects all its sequences' rows at once): queries q
  // [n, query_width()] (RoPE, Hadamard in V4, FP4) and head weights w [n, n_heads()] =
  // bf16(W_w·x) · Di^-½ · Hi^-½, from x [n, hidden] (attention input) and qr [n, q_lora_rank]
  // (normed query latent) at positions pos.
  void queries(const ForwardContext& ctx, const V4Numerics& num, const float* x, const float* qr, int64_t n,
               const int32_t* pos, const std::vector<float>& inv_freq, float* q, float* w) const;
  int64_t query_width() const { return n_heads_ * head_dim_; }
  int64_t n_heads() const { return n_heads_; }
  // V4: the indexer compressor's projections of x [n, hidden] (V4Compressor::project).
  const V4Compressor& key_compressor() const { return compressor_; }

  // Feeds the chunk (its key compressor projections key_kv, key_score) into the indexer's
  // compressor and writes the keys it completes to `keys` (the sequence's paged indexer keys
  // [n_keys, index_dim]; st.n_idx_keys counts them), then selects for each token t its entries:
  // selected[t] ascending entry ids among the (pos[t] + 1) / ratio visible ones (all of them when
  // at most index_topk are visible). The keys are scored where they lie in the pages (no copy).
  // q, w: the chunk's rows of queries().
  void select(const ForwardContext& ctx, const V4Numerics& num, const float* key_kv, const float* key_score,
              const float* q, const float* w, int64_t n, const int32_t* pos,
              const std::vector<float>& inv_freq, V4LayerState& st, const V4EntryPages& keys,
              std::vector<std::vector<int32_t>>& selected) const;

  // V4.1: scores the n_keys keys of the KV source (`keys`, written already) and selects as
  // select() does; the candidate source also fills shared.pool_blocks, a pool layer selects
  // only inside them (among at most top-k pool entries; decision in docs/models.md).
  void select_v41(const ForwardContext& ctx, const float* q, const float* w, int64_t n, const int32_t* pos,
                  const V4EntryPages& keys, int64_t n_keys, V41StepSelection& shared,
                  std::vector<std::vector<int32_t>>& selected) const;

 private:
  // scores (optional) [n, n_keys] and selected from the kernel.
  void score(const ForwardContext& ctx, const float* q, const float* w, int64_t n, const int64_t* n_visible,
             const V4EntryPages& keys, int64_t n_keys, float* scores,
             std::vector<std::vector<int32_t>>& selected) const;

  int64_t n_heads_ = 0, head_dim_ = 0, rope_dim_ = 0, hidden_ = 0, q_lora_ = 0, top_k_ = 0;
  CacheQuant quant_ = CacheQuant::none;  // keys and queries (LayerSpec::index_keys)
  int32_t ratio_ = 0;
  bool hadamard_ = true;  // V4; not V4.1
  bool candidate_source_ = false, candidate_pool_ = false;
  int32_t candidate_block_ = 0, candidate_blocks_ = 0;
  Linear wq_b_, weights_proj_;
  V4Compressor compressor_;  // V4 only (V4.1 keys are the KV source's)
};

// V4.1 index keys of a KV source (model-spec §5.5): k = RMSNorm_k(W_k · latent) from the
// compressed latent before RoPE, then RoPE at the entry's first position and FP4 (32-blocks,
// E8M0). `<prefix>wk.weight` [index_dim, head_dim] BF16, `<prefix>k_norm.weight` [index_dim].
class V41IndexKeys {
 public:
  static Result<V41IndexKeys> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                   const LayerSpec& spec);
  // latent [n, head_dim] -> keys [n, index_dim] (resized)
  void make(const ForwardContext& ctx, const V4Numerics& num, const float* latent, int64_t n,
            const int32_t* entry_pos, const std::vector<float>& inv_freq, std::vector<float>& keys) const;

 private:
  int64_t head_dim_ = 0, index_dim_ = 0, rope_dim_ = 0;
  double eps_ = 0;  // rms_norm_eps as configured (V4.1: 1e-20)
  CacheQuant quant_ = CacheQuant::none;
  Linear wk_;
  std::vector<float> k_norm_;
};

}  // namespace ds
