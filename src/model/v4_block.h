// One V4 transformer block (model-spec §4.1): mHC around attention, then mHC around the MoE, on
// the hc_mult residual streams. Main layers and the MTP layer both use it. V4.1 (§5.1): each
// sublayer collapses the streams with the `pre` the sublayer before it computed (delayed pre).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/v4_attention.h"
#include "model/v4_kv_state.h"
#include "model/v4_mhc.h"
#include "model/v4_moe.h"
#include "model/v4_numerics.h"
#include "model/v4_scratch.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

class V4Block {
 public:
  // `<prefix>` = "layers.N." / "mtp.K."; `spec`: the layer's role (weights/layer_spec.h).
  static Result<V4Block> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                              const LayerSpec& spec, int32_t layer, bool hash_layer,
                              const ExpertExchange* ep = nullptr);

  // streams: [n_rows, hc, hidden], the rows of every sequence in `seqs` (consecutive, in order),
  // updated in place; pos, tokens: [n_rows]. The mHC mixing and norms run over all rows, the MoE
  // over all rows at once (its weights are read once per step), attention (with its projections,
  // compressors and indexer) per sequence. All of it is per-row arithmetic with batch-invariant
  // kernels, so a sequence's rows do not depend on the others.
  // V4.1: carried_pre [n_rows, hc] holds the pre the previous sublayer computed (block 0: the
  // one-hot (1, 0, .., 0)); each sublayer collapses with it and leaves its own, so after the last
  // block it is the final collapse's. nullptr for V4 (each sublayer uses its own pre).
  // V4.1 decoder replay (model/decoder_replay.h): the attention input of every row (collapsed
  // with carried_pre, which is left unchanged) fed into this KV source's compressor only.
  void feed_compressor(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n_rows,
                       const int32_t* pos, std::span<const V4SequenceRows> seqs, V4Scratch& scratch,
                       const double* carried_pre) const;
  // An expert-parallel idle step: the MoE with no rows (ModelRunner::forward_idle).
  V4Moe& ffn() { return ffn_; }  // live EPLB moves its routed experts
  const V4Attention& attention() const { return attn_; }
  void ffn_idle(const ForwardContext& ctx, const V4Numerics& num, V4Scratch& scratch) const {
    ffn_.forward(ctx, num, nullptr, 0, nullptr, nullptr, scratch);
  }
  void forward(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n_rows,
               const int32_t* pos, const int32_t* tokens, std::span<const V4SequenceRows> seqs,
               V4Scratch& scratch, double* carried_pre = nullptr) const;

 private:
  // The mHC collapse and the norm of one sublayer's input: scratch x_norm [n, d], post, comb.
  void sublayer_io(const ForwardContext& ctx, const V4Numerics& num, const MhcMixer& mixer,
                   const std::vector<float>& norm_w, float* streams, int64_t n, V4Scratch& s,
                   double* carried_pre) const;

  MhcDims dims_;
  double eps_ = 0;  // rms_norm_eps as configured (V4.1: 1e-20)
  MhcMixer hc_attn_, hc_ffn_;
  std::vector<float> attn_norm_, ffn_norm_;
  V4Attention attn_;
  V4Moe ffn_;
};

}  // namespace ds
