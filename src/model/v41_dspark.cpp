#include "model/v41_dspark.h"

#include <cmath>
#include <string>

#include "model/v4_norm.h"

namespace ds {

Result<V41DSpark> V41DSpark::load(const Checkpoint& ckpt, const ModelConfig& c,
                                  std::span<const LayerSpec> stage_specs) {
  const DsparkConfig& d = *c.dspark;
  V41DSpark m;
  m.dims_ = mhc_dims(c);
  m.eps_ = c.rms_norm_eps;
  m.block_size_ = d.block_size;
  m.noise_token_ = d.noise_token_id;
  m.markov_rank_ = d.markov_rank;
  m.vocab_ = c.vocab_size;
  m.window_ = c.sliding_window;
  m.head_dim_ = c.head_dim;
  m.target_layers_ = d.target_layer_ids;
  const int64_t hidden = c.hidden_size;
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  // The stages' MoE: their own expert count and top-k (dspark_n_routed_experts, _num_experts_per_tok).
  ModelConfig stage_cfg = c;
  if (d.n_routed_experts > 0) stage_cfg.n_routed_experts = d.n_routed_experts;
  if (d.num_experts_per_tok > 0) stage_cfg.num_experts_per_tok = d.num_experts_per_tok;
  for (size_t k = 0; k < stage_specs.size(); ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    const int32_t layer = c.num_hidden_layers + static_cast<int32_t>(k);
    DS_ASSIGN_OR_RETURN(V4Block b, V4Block::load(ckpt, p, stage_cfg, stage_specs[k], layer, false, nullptr));
    m.stages_.push_back(std::move(b));
  }
  const int64_t n_targets = static_cast<int64_t>(m.target_layers_.size());
  DS_ASSIGN_OR_RETURN(m.main_proj_,
                      load_linear_layer(ckpt, "mtp.0.main_proj", hidden, n_targets * hidden, block));
  DS_ASSIGN_OR_RETURN(m.main_norm_, load_f32(ckpt, "mtp.0.main_norm.weight", Shape{hidden}));
  const std::string last = "mtp." + std::to_string(stage_specs.size() - 1) + ".";
  DS_ASSIGN_OR_RETURN(m.norm_, load_f32(ckpt, last + "norm.weight", Shape{hidden}));
  DS_ASSIGN_OR_RETURN(m.markov_embed_,
                      Embedding::load(ckpt, last + "markov_head.embed.weight", c.vocab_size, d.markov_rank));
  DS_ASSIGN_OR_RETURN(m.markov_head_,
                      load_linear_layer(ckpt, last + "markov_head.head", c.vocab_size, d.markov_rank, block));
  DS_ASSIGN_OR_RETURN(m.conf_w_,
                      load_f32(ckpt, last + "confidence_head.proj.weight", Shape{1, hidden + d.markov_rank}));
  const std::string bias = last + "confidence_head.proj.bias";
  if (ckpt.find(bias) != nullptr) {
    DS_ASSIGN_OR_RETURN(const std::vector<float> b, load_f32_param(ckpt, bias, Shape{1}));
    m.conf_b_ = b[0];
  }
  return m;
}

void V41DSpark::context_features(const ForwardContext& ctx, const V4Numerics& num, const float* f, int64_t n,
                                 float* c) const {
  const int64_t d = dims_.hidden;
  std::vector<float> projected(static_cast<size_t>(n * d));
  linear(ctx, main_proj_.w, f, n, static_cast<int64_t>(target_layers_.size()) * d, projected.data(), d);
  v4_rmsnorm(ctx.isa, num, Bf16Point::final_norm, projected.data(), n, d, main_norm_.data(), eps_, c);
}

void V41DSpark::reset_rings(std::vector<V4LayerState>& rings) const {
  rings.assign(stages_.size(), {});
  for (V4LayerState& r : rings) r.reset(window_, head_dim_, 0, false, false, 0);
}

void V41DSpark::inject(const ForwardContext& ctx, const V4Numerics& num, const float* c, int64_t n,
                       const int32_t* pos, std::vector<V4LayerState>& rings, V4Scratch& scratch) const {
  for (size_t s = 0; s < stages_.size(); ++s)
    stages_[s].attention().inject_context(ctx, num, c, n, pos, rings[s], scratch);
}

void V41DSpark::forward(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n_blocks,
                        const int32_t* pos, const int32_t* ids,
                        std::span<std::vector<V4LayerState>* const> rings, double* carried, float* h,
                        V4Scratch& scratch) const {
  const int64_t hc = dims_.hc, d = dims_.hidden, B = block_size_;
  const int64_t n_rows = n_blocks * B;
  for (int64_t t = 0; t < n_rows; ++t)  // stage 0's attention collapses with the one-hot pre
    for (int64_t k = 0; k < hc; ++k) carried[t * hc + k] = k == 0 ? 1.0 : 0.0;
  std::vector<V4SequenceRows> rows(static_cast<size_t>(n_blocks));
  for (size_t s = 0; s < stages_.size(); ++s) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      V4SequenceRows& r = rows[static_cast<size_t>(b)];
      r = V4SequenceRows{};
      r.first_row = b * B;
      r.n = B;
      r.state = &(*rings[static_cast<size_t>(b)])[s];
      r.draft_block = true;
    }
    stages_[s].forward(ctx, num, streams, n_rows, pos, ids, rows, scratch, carried);
  }
  std::vector<float> col(static_cast<size_t>(n_rows * d));
  ctx.pool->parallel_range(n_rows, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)  // the last stage's FFN pre (as the main model's final collapse)
      mhc_collapse(ctx.isa, num, dims_, streams + t * hc * d, carried + t * hc, col.data() + t * d,
                   Bf16Point::head_collapse);
  });
  v4_rmsnorm(ctx.isa, num, Bf16Point::final_norm, col.data(), n_rows, d, norm_.data(), eps_, h);
}

void V41DSpark::lookup_prev(int32_t prev) const {
  prev_embed_.resize(static_cast<size_t>(markov_rank_));
  markov_embed_.lookup(&prev, 1, prev_embed_.data(), markov_rank_);
}

void V41DSpark::add_markov_bias(const ForwardContext& ctx, int32_t prev, float* logits) const {
  lookup_prev(prev);
  bias_.resize(static_cast<size_t>(vocab_));  // [vocab], reused: a draft row's bias is a GEMV over it
  linear(ctx, markov_head_.w, prev_embed_.data(), 1, markov_rank_, bias_.data(), vocab_);
  for (int64_t v = 0; v < vocab_; ++v) logits[v] += bias_[static_cast<size_t>(v)];
}

float V41DSpark::confidence(const float* h, int32_t prev) const {
  const int64_t d = dims_.hidden;
  lookup_prev(prev);
  double z = conf_b_;
  for (int64_t i = 0; i < d; ++i) z += static_cast<double>(conf_w_[static_cast<size_t>(i)]) * h[i];
  for (int64_t i = 0; i < markov_rank_; ++i)
    z += static_cast<double>(conf_w_[static_cast<size_t>(d + i)]) * prev_embed_[static_cast<size_t>(i)];
  return static_cast<float>(1.0 / (1.0 + std::exp(-z)));
}

}  // namespace ds
