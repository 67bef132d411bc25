#include "model/v4_mhc.h"

#include <cmath>

#include "kernels/mhc.h"

namespace ds {

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// mixes [n_out] = (fn · v) · rho, rho = 1 / sqrt(mean(v²) + eps), v = the streams flattened
// (kernels/mhc.h: fn_t is fn transposed, so the n_out sums, each in index order, advance together).
// All mHC arithmetic is double (docs/numerics.md "V4 ablation"): its results are rounded to bf16
// into the stream state, and f32 errors there (1e-7 relative over a 4·hidden dot product and 20
// Sinkhorn rounds) flipped enough of those roundings to move the engine as far from the reference
// as bf16 itself; it is ~(2+hc)·hc·hc·hidden MACs per sublayer and token.
void mix(Isa isa, const MhcDims& d, const std::vector<float>& fn_t, int64_t n_out, const float* v,
         double* mixes) {
  mhc_mix(isa, fn_t.data(), d.hc * d.hidden, n_out, v, d.norm_eps, mixes);
}

// [rows, cols] -> [cols, rows]
std::vector<float> transposed(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

}  // namespace

MhcDims mhc_dims(const ModelConfig& c) {
  return MhcDims{c.hc_mult, c.hidden_size, c.hc_sinkhorn_iters, static_cast<float>(c.hc_eps), c.rms_norm_eps};
}

Result<MhcMixer> MhcMixer::load(const Checkpoint& ckpt, const std::string& prefix, const MhcDims& dims) {
  MhcMixer m;
  m.dims_ = dims;
  const int64_t n_mix = (2 + dims.hc) * dims.hc;
  DS_ASSIGN_OR_RETURN(std::vector<float> fn,
                      load_f32_param(ckpt, prefix + "_fn", Shape{n_mix, dims.hc * dims.hidden}));
  m.fn_t_ = transposed(fn, n_mix, dims.hc * dims.hidden);
  DS_ASSIGN_OR_RETURN(m.base_, load_f32_param(ckpt, prefix + "_base", Shape{n_mix}));
  DS_ASSIGN_OR_RETURN(m.scale_, load_f32_param(ckpt, prefix + "_scale", Shape{3}));
  return m;
}

MhcMixer MhcMixer::from_params(const MhcDims& dims, const std::vector<float>& fn, std::vector<float> base,
                               std::vector<float> scale) {
  MhcMixer m;
  m.dims_ = dims;
  m.fn_t_ = transposed(fn, (2 + dims.hc) * dims.hc, dims.hc * dims.hidden);
  m.base_ = std::move(base);
  m.scale_ = std::move(scale);
  return m;
}

void MhcMixer::pre(Isa isa, const V4Numerics& num, const float* streams, float* x, double* post,
                   double* comb) const {
  std::vector<double> pre(static_cast<size_t>(dims_.hc));
  coefficients(isa, streams, pre.data(), post, comb);
  mhc_collapse(isa, num, dims_, streams, pre.data(), x);
}

void MhcMixer::coefficients(Isa isa, const float* streams, double* pre, double* post, double* comb) const {
  const int64_t hc = dims_.hc;
  const double eps = dims_.eps;
  std::vector<double> mixes(static_cast<size_t>((2 + hc) * hc));
  mix(isa, dims_, fn_t_, (2 + hc) * hc, streams, mixes.data());
  for (int64_t k = 0; k < hc; ++k) {
    pre[k] = sigmoid(mixes[k] * scale_[0] + base_[k]) + eps;
    post[k] = 2.0 * sigmoid(mixes[hc + k] * scale_[1] + base_[hc + k]);
  }
  // comb: softmax over each row (output streams j of input i), + eps, then alternate column and
  // row normalisation (Sinkhorn), iters - 1 more rounds after the first column pass.
  for (int64_t i = 0; i < hc; ++i) {
    double* r = comb + i * hc;
    double mx = -INFINITY;
    for (int64_t j = 0; j < hc; ++j) {
      r[j] = mixes[2 * hc + i * hc + j] * scale_[2] + base_[2 * hc + i * hc + j];
      mx = std::max(mx, r[j]);
    }
    double s = 0;
    for (int64_t j = 0; j < hc; ++j) s += (r[j] = std::exp(r[j] - mx));
    for (int64_t j = 0; j < hc; ++j) r[j] = r[j] / s + eps;
  }
  auto col_norm = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      double s = 0;
      for (int64_t i = 0; i < hc; ++i) s += comb[i * hc + j];
      for (int64_t i = 0; i < hc; ++i) comb[i * hc + j] /= s + eps;
    }
  };
  auto row_norm = [&] {
    for (int64_t i = 0; i < hc; ++i) {
      double s = 0;
      for (int64_t j = 0; j < hc; ++j) s += comb[i * hc + j];
      for (int64_t j = 0; j < hc; ++j) comb[i * hc + j] /= s + eps;
    }
  };
  col_norm();
  for (int it = 1; it < dims_.sinkhorn_iters; ++it) {
    row_norm();
    col_norm();
  }
}

void mhc_collapse(Isa isa, const V4Numerics& num, const MhcDims& dims, const float* streams,
                  const double* pre, float* x, Bf16Point point) {
  mhc_collapse(isa, streams, dims.hc, dims.hidden, pre, num.rounds(point), x);
}

void MhcMixer::post(Isa isa, const V4Numerics& num, const float* f, const double* post, const double* comb,
                    float* streams) const {
  const int64_t hc = dims_.hc, d = dims_.hidden;
  std::vector<float> out(static_cast<size_t>(hc * d));
  mhc_expand(isa, streams, f, post, comb, hc, d, num.rounds(Bf16Point::mhc_expand), out.data());
  std::copy(out.begin(), out.end(), streams);
}

Result<MhcHead> MhcHead::load(const Checkpoint& ckpt, const std::string& prefix, const MhcDims& dims) {
  MhcHead h;
  h.dims_ = dims;
  DS_ASSIGN_OR_RETURN(std::vector<float> fn,
                      load_f32_param(ckpt, prefix + "hc_head_fn", Shape{dims.hc, dims.hc * dims.hidden}));
  h.fn_t_ = transposed(fn, dims.hc, dims.hc * dims.hidden);
  DS_ASSIGN_OR_RETURN(h.base_, load_f32_param(ckpt, prefix + "hc_head_base", Shape{dims.hc}));
  DS_ASSIGN_OR_RETURN(h.scale_, load_f32_param(ckpt, prefix + "hc_head_scale", Shape{1}));
  return h;
}

void MhcHead::collapse(Isa isa, const V4Numerics& num, const float* streams, float* out) const {
  const int64_t hc = dims_.hc;
  std::vector<double> mixes(static_cast<size_t>(hc));
  mix(isa, dims_, fn_t_, hc, streams, mixes.data());
  for (int64_t k = 0; k < hc; ++k) mixes[k] = sigmoid(mixes[k] * scale_[0] + base_[k]) + dims_.eps;
  mhc_collapse(isa, streams, hc, dims_.hidden, mixes.data(), num.rounds(Bf16Point::head_collapse), out);
}

}  // namespace ds
