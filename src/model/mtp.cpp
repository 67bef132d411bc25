#include "model/mtp.h"

#include "kernels/norm.h"

namespace ds {

Result<MtpLayer> MtpLayer::load(const Checkpoint& ckpt, const ModelConfig& cfg, const MlaDims& dims,
                                int block, const Embedding& main_embed, const WeightMatrix& main_head) {
  const int idx = cfg.num_hidden_layers;
  const std::string p = "model.layers." + std::to_string(idx);
  const int64_t H = cfg.hidden_size;
  MtpLayer m;
  m.hidden_ = H;
  m.vocab_ = cfg.vocab_size;
  m.eps_ = static_cast<float>(cfg.rms_norm_eps);
  if (ckpt.find(p + ".embed_tokens.weight") != nullptr) {
    DS_ASSIGN_OR_RETURN(m.embed_, Embedding::load(ckpt, p + ".embed_tokens.weight", cfg.vocab_size, H));
  } else {
    m.embed_ = main_embed;
  }
  DS_ASSIGN_OR_RETURN(m.enorm_, load_f32(ckpt, p + ".enorm.weight", Shape{H}));
  DS_ASSIGN_OR_RETURN(m.hnorm_, load_f32(ckpt, p + ".hnorm.weight", Shape{H}));
  DS_ASSIGN_OR_RETURN(m.eh_proj_, load_linear_layer(ckpt, p + ".eh_proj", H, 2 * H, block));
  DS_ASSIGN_OR_RETURN(m.head_norm_, load_f32(ckpt, p + ".shared_head.norm.weight", Shape{H}));
  DS_ASSIGN_OR_RETURN(m.block_, DecoderLayer::load(ckpt, idx, cfg, dims, block));
  if (ckpt.find(p + ".shared_head.head.weight") != nullptr) {
    DS_ASSIGN_OR_RETURN(m.own_head_,
                        load_linear_layer(ckpt, p + ".shared_head.head", cfg.vocab_size, H, block));
    m.head_ = m.own_head_->w;
  } else {
    m.head_ = main_head;
  }
  return m;
}

void MtpLayer::forward(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
                       const std::vector<float>& inv_freq, const int32_t* next_tokens, const float* hidden,
                       MtpScratch& s, LayerScratch& ls, float* logits) const {
  block(ctx, mode, batch, inv_freq, next_tokens, hidden, s, ls);
  s.normed.reshape(Shape{batch.n_rows, hidden_});
  head(ctx, s.x.data(), batch.n_rows, s.normed.data(), logits);
}

void MtpLayer::block(const ForwardContext& ctx, MlaMode mode, const AttentionBatch& batch,
                     const std::vector<float>& inv_freq, const int32_t* next_tokens, const float* hidden,
                     MtpScratch& s, LayerScratch& ls) const {
  const int64_t T = batch.n_rows;
  const int64_t H = hidden_;
  s.cat.reshape(Shape{T, 2 * H});
  s.x.reshape(Shape{T, H});
  // e first, then h (numerics.md).
  embed_.lookup(next_tokens, T, s.cat.data(), 2 * H);
  rmsnorm(ctx.isa, s.cat.data(), T, H, 2 * H, enorm_.data(), eps_, s.cat.data(), 2 * H);
  rmsnorm(ctx.isa, hidden, T, H, H, hnorm_.data(), eps_, s.cat.data() + H, 2 * H);
  linear(ctx, eh_proj_.w, s.cat.data(), T, 2 * H, s.x.data(), H);
  block_->forward(ctx, mode, batch, inv_freq, s.x.data(), ls);
}

void MtpLayer::head(const ForwardContext& ctx, const float* x, int64_t n_rows, float* normed,
                    float* logits) const {
  rmsnorm(ctx.isa, x, n_rows, hidden_, hidden_, head_norm_.data(), eps_, normed, hidden_);
  linear(ctx, head_, normed, n_rows, hidden_, logits, vocab_);
}

Status MtpLayer::set_draft_vocab(std::span<const int32_t> ids) {
  draft_head_ = WeightMatrix{};
  draft_head_storage_.clear();
  if (ids.empty()) return ok_status();
  DS_ASSIGN_OR_RETURN(draft_head_, select_rows(head_, ids, draft_head_storage_));
  return ok_status();
}

void MtpLayer::draft_head(const ForwardContext& ctx, const float* x, int64_t n_rows, float* normed,
                          float* logits) const {
  rmsnorm(ctx.isa, x, n_rows, hidden_, hidden_, head_norm_.data(), eps_, normed, hidden_);
  linear(ctx, draft_head_, normed, n_rows, hidden_, logits, draft_head_.rows);
}

}  // namespace ds
