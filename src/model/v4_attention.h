// V4 attention of one layer (model-spec §4.3, §4.6, §4.7): low-rank queries with per-head RMS
// normalisation, one shared K=V latent per token (RMSNorm, RoPE on its last rope_dim channels,
// FP8 simulation of the rest), keys = the sliding window (ring + this chunk) then the compressed
// entries (all visible ones in HCA, the indexer's top-k in CSA), softmax with a per-head sink,
// inverse RoPE of the output, and the grouped low-rank output projection. V4.1 (§5.2-5.6, CSA2):
// no per-head q norm by default (V4Numerics::q_head_norm), FP8 window KV over all channels
// (LayerSpec::window_kv), and only KV sources own a compressor (plus the index keys); every
// compressed layer selects top-k entries of its source's cache, computed by index sources and
// reused by the layers after them (V4SequenceRows::source, ::shared).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_compressor.h"
#include "model/v4_indexer.h"
#include "model/v4_kv_state.h"
#include "model/v4_numerics.h"
#include "model/v4_scratch.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class V4Attention {
 public:
  // `<prefix>` = "layers.N.attn." / "mtp.K.attn."; `spec`: the layer's role (weights/layer_spec.h).
  static Result<V4Attention> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                  const LayerSpec& spec);

  // x: [n_rows, hidden] the normed attention input of the chunks of `seqs` (rows consecutive, in
  // order) at positions pos[0..n_rows); out: [n_rows, hidden]. Every projection (query/KV, the
  // compressors', the indexer's queries and weights, output) runs over all rows at once (weights
  // read once per step); the compressors' pooling, the indexer's scoring and the attention itself
  // run per sequence: each reads and advances its `state` (ring, compressors), reads its
  // compressed entries and indexer keys from its `pages` and writes the ones its chunk completes.
  // x and out must not be in the attention's scratch fields.
  void forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n_rows,
               const int32_t* pos, std::span<const V4SequenceRows> seqs, float* out,
               V4Scratch& scratch) const;

  // V4.1 decoder replay (model/decoder_replay.h): feeds the rows of `seqs` (x [n_rows, hidden],
  // all of each sequence's chunk) into this KV source's compressor and index keys only; a later
  // forward over a suffix of those rows with V4SequenceRows::compressor_fed runs the rest.
  void feed_compressor(const ForwardContext& ctx, const V4Numerics& num, const float* x, const int32_t* pos,
                       std::span<const V4SequenceRows> seqs, V4Scratch& scratch) const;
  bool owns_compressor() const { return compressor_.has_value(); }

  // DSpark KV injection (docs/dspark.md): the window-KV path (wkv, kv_norm, RoPE, the window's FP8
  // simulation) on n context features c [n, hidden] at positions pos, written into the ring `st`.
  void inject_context(const ForwardContext& ctx, const V4Numerics& num, const float* c, int64_t n,
                      const int32_t* pos, V4LayerState& st, V4Scratch& scratch) const;

  int32_t ratio() const { return ratio_; }
  bool csa() const { return indexer_.has_value(); }
  bool q_head_norm(const V4Numerics& num) const {
    return num.q_head_norm < 0 ? q_head_norm_ : num.q_head_norm > 0;
  }

 private:
  // The compressors' and the indexer's projections of a step's rows (project()), pointers into
  // V4Scratch with the matrices' widths as row strides; null where the layer has no such part.
  struct Projections {
    const float* comp_kv = nullptr;  // main compressor kv, score [n, comp_width]
    const float* comp_score = nullptr;
    int64_t comp_width = 0;
    const float* key_kv = nullptr;  // V4 indexer key compressor kv, score [n, key_width]
    const float* key_score = nullptr;
    int64_t key_width = 0;
    const float* iq = nullptr;  // indexer queries [n, iq_width] and head weights [n, iw_width]
    const float* iw = nullptr;
    int64_t iq_width = 0, iw_width = 0;
    Projections from_row(int64_t row) const;  // the same rows from `row` on
  };
  // Projects every row of `seqs` that needs it: the main compressor for the sequences whose
  // compressor has not consumed their chunk (V4SequenceRows::compressor_fed), the indexer for all.
  Projections project(const ForwardContext& ctx, const V4Numerics& num, const float* x, const float* qr,
                      int64_t n_rows, const int32_t* pos, std::span<const V4SequenceRows> seqs,
                      V4Scratch& scratch) const;
  // The main compressor's part of project() over rows [0, n_rows) (indexed by step row; the
  // sequences' rows only are written), skipping V4SequenceRows::compressor_fed ones if skip_fed.
  Projections project_compressor(const ForwardContext& ctx, const float* x, int64_t n_rows,
                                 std::span<const V4SequenceRows> seqs, bool skip_fed,
                                 V4Scratch& scratch) const;
  // One sequence's part of forward: its compressor's pooling and the indexer, window keys and
  // sparse attention over its rows (p: its rows' projections, q [n, H, D], kv [n, D]);
  // o: [n, H, D] before the inverse RoPE. Advances the ring.
  void attend(const ForwardContext& ctx, const V4Numerics& num, const Projections& p, const float* q,
              const float* kv, int64_t n, const int32_t* pos, const V4SequenceRows& rows, float* o,
              V4Scratch& scratch) const;
  // The compressed entries each row attends to (entry ids of the source's cache): the indexer's
  // top-k (V4 CSA, V4.1 index sources), the reused top-k (V4.1), or every visible one (V4 HCA).
  void selection(const ForwardContext& ctx, const V4Numerics& num, const Projections& p, int64_t n,
                 const int32_t* pos, const V4SequenceRows& rows, int64_t n_entries,
                 std::vector<std::vector<int32_t>>& selected) const;
  // One sequence's compressor (and V4.1 index keys) over its rows' projections kv, score
  // [n, compressor width]: writes the entries its rows complete.
  void compress(const ForwardContext& ctx, const V4Numerics& num, const float* kv, const float* score,
                int64_t n, const int32_t* pos, const V4SequenceRows& rows, V4Scratch& scratch) const;
  void slice_wo_a();  // fills wo_a_groups_ (and wo_a_f32_ when needed) from wo_a_
  // The shared K=V latent of n rows x [n, hidden] at pos: kv [n, D] after kv_norm, RoPE and the
  // window's storage simulation (kva: [n, D] scratch for the projection).
  void window_kv(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
                 const int32_t* pos, float* kva, float* kv) const;

  int64_t hidden_ = 0, n_heads_ = 0, head_dim_ = 0, rope_dim_ = 0, q_lora_ = 0, o_groups_ = 0, o_lora_ = 0;
  int32_t window_ = 0, ratio_ = 0;
  CacheQuant window_quant_ = CacheQuant::none;  // the window ring's storage (LayerSpec::window_kv)
  bool q_head_norm_ = true;                     // the model's default (V4 on, V4.1 off)
  bool v41_ = false;                            // CSA2: top-k on every compressed layer, sources shared
  double eps_ = 0;                              // rms_norm_eps as configured (V4.1: 1e-20)
  std::vector<float> inv_freq_;  // SWA layers: rope_theta; compressed layers: compress_rope_theta + YaRN
  Linear wq_a_, wq_b_, wkv_, wo_b_;
  // wo_a [o_groups·o_lora, H·D/o_groups] as stored and its o_groups row slices (one per group).
  // Slices stay in the stored format when rows split on scale-block boundaries (fp8: o_lora a
  // multiple of block_rows; bf16, f32); otherwise they view wo_a_f32_, the matrix widened once.
  // Both give the same bits (matmul.h: the paths dequantise exactly, the sum order is the format's).
  Linear wo_a_;
  std::vector<float> wo_a_f32_;
  std::vector<WeightMatrix> wo_a_groups_;
  std::vector<float> q_norm_, kv_norm_, sink_;
  std::optional<V4Compressor> compressor_;
  std::optional<V4Indexer> indexer_;
  std::optional<V41IndexKeys> index_keys_;  // V4.1 KV sources
};

}  // namespace ds
