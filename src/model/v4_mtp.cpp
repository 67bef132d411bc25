#include "model/v4_mtp.h"

#include <algorithm>

#include "kernels/norm.h"
#include "model/v4_norm.h"

namespace ds {

Result<V4Mtp> V4Mtp::load(const Checkpoint& ckpt, const ModelConfig& c, int k, const LayerSpec& spec) {
  V4Mtp m;
  m.dims_ = mhc_dims(c);
  m.eps_ = c.rms_norm_eps;
  const std::string p = "mtp." + std::to_string(k) + ".";
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  const int64_t d = c.hidden_size;
  DS_ASSIGN_OR_RETURN(m.e_proj_, load_linear_layer(ckpt, p + "e_proj", d, d, block));
  DS_ASSIGN_OR_RETURN(m.h_proj_, load_linear_layer(ckpt, p + "h_proj", d, d, block));
  DS_ASSIGN_OR_RETURN(m.enorm_, load_f32(ckpt, p + "enorm.weight", Shape{d}));
  DS_ASSIGN_OR_RETURN(m.hnorm_, load_f32(ckpt, p + "hnorm.weight", Shape{d}));
  DS_ASSIGN_OR_RETURN(m.norm_, load_f32(ckpt, p + "norm.weight", Shape{d}));
  DS_ASSIGN_OR_RETURN(m.block_, V4Block::load(ckpt, p, c, spec, static_cast<int32_t>(c.num_hidden_layers + k),
                                              /*hash_layer=*/false));
  DS_ASSIGN_OR_RETURN(m.head_, MhcHead::load(ckpt, p, m.dims_));
  return m;
}

void V4Mtp::forward(const ForwardContext& ctx, const V4Numerics& num, const Embedding& embed,
                    const float* main_streams, const int32_t* next_tokens, int64_t n, const int32_t* pos,
                    V4LayerState& st, const V4LayerPages& pages, float* h_out, V4Scratch& scratch,
                    float* last_streams) const {
  const int64_t hc = dims_.hc, d = dims_.hidden;
  // e: [n, d] enorm(embedding); hx: [n·hc, d] hnorm per stream; h0: [n, hc, d]
  std::vector<float> e(static_cast<size_t>(n * d)), en(e.size()), ep(e.size());
  embed.lookup(next_tokens, n, e.data(), d);
  v4_rmsnorm(ctx.isa, num, Bf16Point::mtp_norm, e.data(), n, d, enorm_.data(), eps_, en.data());
  std::vector<float> hx(static_cast<size_t>(n * hc * d)), h0(hx.size());
  v4_rmsnorm(ctx.isa, num, Bf16Point::mtp_norm, main_streams, n * hc, d, hnorm_.data(), eps_, hx.data());
  linear(ctx, e_proj_.w, en.data(), n, d, ep.data(), d);
  linear(ctx, h_proj_.w, hx.data(), n * hc, d, h0.data(), d);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < hc; ++k)
      for (int64_t c = 0; c < d; ++c) {
        float& v = h0[(t * hc + k) * d + c];
        v = num.round(Bf16Point::mtp_h0, ep[t * d + c] + v);
      }
  const V4SequenceRows rows{0, n, &st, pages};
  block_.forward(ctx, num, h0.data(), n, pos, next_tokens, {&rows, 1}, scratch);
  if (last_streams != nullptr) std::copy_n(h0.data() + (n - 1) * hc * d, hc * d, last_streams);
  std::vector<float> col(static_cast<size_t>(n * d));
  for (int64_t t = 0; t < n; ++t) head_.collapse(ctx.isa, num, h0.data() + t * hc * d, col.data() + t * d);
  v4_rmsnorm(ctx.isa, num, Bf16Point::final_norm, col.data(), n, d, norm_.data(), eps_, h_out);
}

}  // namespace ds
