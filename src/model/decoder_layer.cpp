#include "model/decoder_layer.h"

#include "kernels/norm.h"

namespace ds {

Result<DecoderLayer> DecoderLayer::load(const Checkpoint& ckpt, int layer_idx, const ModelConfig& cfg,
                                        const MlaDims& dims, int block, const ExpertExchange* ep) {
  const std::string p = "model.layers." + std::to_string(layer_idx);
  DecoderLayer l;
  l.hidden_ = cfg.hidden_size;
  l.eps_ = static_cast<float>(cfg.rms_norm_eps);
  DS_ASSIGN_OR_RETURN(l.input_norm_, load_f32(ckpt, p + ".input_layernorm.weight", Shape{cfg.hidden_size}));
  DS_ASSIGN_OR_RETURN(l.post_attn_norm_,
                      load_f32(ckpt, p + ".post_attention_layernorm.weight", Shape{cfg.hidden_size}));
  DS_ASSIGN_OR_RETURN(l.attn_, MlaAttention::load(ckpt, p + ".self_attn", dims, block));
  if (cfg.is_moe_layer(layer_idx)) {
    DS_ASSIGN_OR_RETURN(l.moe_, Moe::load(ckpt, p + ".mlp", cfg, block, layer_idx, ep));
  } else {
    DS_ASSIGN_OR_RETURN(l.dense_,
                        DenseMlp::load(ckpt, p + ".mlp", cfg.hidden_size, cfg.intermediate_size, block));
  }
  return l;
}

void DecoderLayer::forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
                           const std::vector<float>& inv_freq, float* x, LayerScratch& s) const {
  const int64_t T = batch.n_rows;
  const int64_t H = hidden_;
  s.normed.reshape(Shape{T, H});
  s.branch.reshape(Shape{T, H});

  rmsnorm(ctx.isa, x, T, H, H, input_norm_.data(), eps_, s.normed.data(), H);
  attn_.forward(ctx, mode, batch, inv_freq, s.normed.data(), s.mla, s.branch.data());
  for (int64_t i = 0; i < T * H; ++i) x[i] += s.branch.data()[i];

  rmsnorm(ctx.isa, x, T, H, H, post_attn_norm_.data(), eps_, s.normed.data(), H);
  if (moe_) {
    moe_->forward(ctx, s.normed.data(), T, s.moe, s.branch.data());
  } else {
    dense_->forward(ctx, s.normed.data(), T, H, s.mlp, s.branch.data(), H);
  }
  for (int64_t i = 0; i < T * H; ++i) x[i] += s.branch.data()[i];
}

}  // namespace ds
