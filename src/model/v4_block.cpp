#include "model/v4_block.h"
#include "model/v4_norm.h"

#include <algorithm>

#include "kernels/norm.h"

namespace ds {

Result<V4Block> V4Block::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                              const LayerSpec& spec, int32_t layer, bool hash_layer,
                              const ExpertExchange* ep) {
  V4Block b;
  b.dims_ = mhc_dims(c);
  b.eps_ = c.rms_norm_eps;
  DS_ASSIGN_OR_RETURN(b.hc_attn_, MhcMixer::load(ckpt, prefix + "hc_attn", b.dims_));
  DS_ASSIGN_OR_RETURN(b.hc_ffn_, MhcMixer::load(ckpt, prefix + "hc_ffn", b.dims_));
  DS_ASSIGN_OR_RETURN(b.attn_norm_, load_f32(ckpt, prefix + "attn_norm.weight", Shape{c.hidden_size}));
  DS_ASSIGN_OR_RETURN(b.ffn_norm_, load_f32(ckpt, prefix + "ffn_norm.weight", Shape{c.hidden_size}));
  DS_ASSIGN_OR_RETURN(b.attn_, V4Attention::load(ckpt, prefix + "attn.", c, spec));
  DS_ASSIGN_OR_RETURN(b.ffn_, V4Moe::load(ckpt, prefix + "ffn.", c, layer, hash_layer, ep));
  return b;
}

void V4Block::sublayer_io(const ForwardContext& ctx, const V4Numerics& num, const MhcMixer& mixer,
                          const std::vector<float>& norm_w, float* streams, int64_t n, V4Scratch& s,
                          double* carried_pre) const {
  const int64_t hc = dims_.hc, d = dims_.hidden;
  // x, x_norm: [n, d]; post: [n, hc]; comb: [n, hc, hc]
  float* x = scratch_of(s.x, n * d);
  float* x_norm = scratch_of(s.x_norm, n * d);
  double* post = scratch_of(s.post, n * hc);
  double* comb = scratch_of(s.comb, n * hc * hc);
  // Tokens are independent (per-token arithmetic): the pool splits them, results do not change.
  ctx.pool->parallel_range(n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<double> own_pre(static_cast<size_t>(hc));
    for (int64_t t = t0; t < t1; ++t) {
      if (carried_pre == nullptr) {
        mixer.pre(ctx.isa, num, streams + t * hc * d, x + t * d, post + t * hc, comb + t * hc * hc);
        continue;
      }
      double* carried = carried_pre + t * hc;
      mixer.coefficients(ctx.isa, streams + t * hc * d, own_pre.data(), post + t * hc, comb + t * hc * hc);
      mhc_collapse(ctx.isa, num, dims_, streams + t * hc * d, carried, x + t * d);
      std::copy(own_pre.begin(), own_pre.end(), carried);
    }
  });
  v4_rmsnorm(ctx.isa, num, Bf16Point::sub_norm, x, n, d, norm_w.data(), eps_, x_norm);
}

void V4Block::feed_compressor(const ForwardContext& ctx, const V4Numerics& num, float* streams,
                              int64_t n_rows, const int32_t* pos, std::span<const V4SequenceRows> seqs,
                              V4Scratch& scratch, const double* carried_pre) const {
  std::vector<double> pre;  // a copy: the block's own forward collapses with the same pre again
  if (carried_pre != nullptr) pre.assign(carried_pre, carried_pre + n_rows * dims_.hc);
  sublayer_io(ctx, num, hc_attn_, attn_norm_, streams, n_rows, scratch, carried_pre ? pre.data() : nullptr);
  attn_.feed_compressor(ctx, num, scratch.x_norm.data(), pos, seqs, scratch);
}

void V4Block::forward(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n_rows,
                      const int32_t* pos, const int32_t* tokens, std::span<const V4SequenceRows> seqs,
                      V4Scratch& scratch, double* carried_pre) const {
  const int64_t n = n_rows;
  const int64_t hc = dims_.hc, d = dims_.hidden;
  float* f = scratch_of(scratch.f, n * d);  // f: [n, d] the sublayer's output
  auto mix_back = [&](const MhcMixer& mixer) {
    const double* post = scratch.post.data();
    const double* comb = scratch.comb.data();
    ctx.pool->parallel_range(n, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        mixer.post(ctx.isa, num, f + t * d, post + t * hc, comb + t * hc * hc, streams + t * hc * d);
    });
  };
  sublayer_io(ctx, num, hc_attn_, attn_norm_, streams, n, scratch, carried_pre);
  attn_.forward(ctx, num, scratch.x_norm.data(), n, pos, seqs, f, scratch);
  mix_back(hc_attn_);
  sublayer_io(ctx, num, hc_ffn_, ffn_norm_, streams, n, scratch, carried_pre);
  ffn_.forward(ctx, num, scratch.x_norm.data(), n, tokens, f, scratch);
  mix_back(hc_ffn_);
}

}  // namespace ds
