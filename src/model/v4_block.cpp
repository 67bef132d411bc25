#include "model/v4_block.h"

#include "kernels/norm.h"

namespace ds {

Result<V4Block> V4Block::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                              int layer, bool hash_layer) {
  V4Block b;
  b.dims_ = mhc_dims(c);
  b.eps_ = static_cast<float>(c.rms_norm_eps);
  DS_ASSIGN_OR_RETURN(b.hc_attn_, MhcMixer::load(ckpt, prefix + "hc_attn", b.dims_));
  DS_ASSIGN_OR_RETURN(b.hc_ffn_, MhcMixer::load(ckpt, prefix + "hc_ffn", b.dims_));
  DS_ASSIGN_OR_RETURN(b.attn_norm_, load_f32(ckpt, prefix + "attn_norm.weight", Shape{c.hidden_size}));
  DS_ASSIGN_OR_RETURN(b.ffn_norm_, load_f32(ckpt, prefix + "ffn_norm.weight", Shape{c.hidden_size}));
  DS_ASSIGN_OR_RETURN(b.attn_, V4Attention::load(ckpt, prefix + "attn.", c, layer));
  DS_ASSIGN_OR_RETURN(b.ffn_, V4Moe::load(ckpt, prefix + "ffn.", c, hash_layer));
  return b;
}

void V4Block::sublayer_io(const V4Numerics& num, const MhcMixer& mixer, const std::vector<float>& norm_w,
                          float* streams, int64_t n, std::vector<float>& x_norm, std::vector<float>& post,
                          std::vector<float>& comb) const {
  const int64_t hc = dims_.hc, d = dims_.hidden;
  std::vector<float> x(static_cast<size_t>(n * d));
  post.resize(static_cast<size_t>(n * hc));
  comb.resize(static_cast<size_t>(n * hc * hc));
  for (int64_t t = 0; t < n; ++t)
    mixer.pre(num, streams + t * hc * d, x.data() + t * d, post.data() + t * hc, comb.data() + t * hc * hc);
  x_norm.resize(x.size());
  rmsnorm(Isa::reference, x.data(), n, d, d, norm_w.data(), eps_, x_norm.data(), d);
  num.round_inplace(x_norm.data(), n * d);
}

void V4Block::forward(const ForwardContext& ctx, const V4Numerics& num, float* streams, int64_t n,
                      const int32_t* pos, const int32_t* tokens, V4LayerState& st,
                      const V4LayerPages& pages) const {
  const int64_t hc = dims_.hc, d = dims_.hidden;
  std::vector<float> x_norm, post, comb, f(static_cast<size_t>(n * d));
  sublayer_io(num, hc_attn_, attn_norm_, streams, n, x_norm, post, comb);
  attn_.forward(ctx, num, x_norm.data(), n, pos, st, pages, f.data());
  for (int64_t t = 0; t < n; ++t)
    hc_attn_.post(num, f.data() + t * d, post.data() + t * hc, comb.data() + t * hc * hc,
                  streams + t * hc * d);
  sublayer_io(num, hc_ffn_, ffn_norm_, streams, n, x_norm, post, comb);
  ffn_.forward(ctx, num, x_norm.data(), n, tokens, f.data());
  for (int64_t t = 0; t < n; ++t)
    hc_ffn_.post(num, f.data() + t * d, post.data() + t * hc, comb.data() + t * hc * hc,
                 streams + t * hc * d);
}

}  // namespace ds
