#include "kernels/ref/ops_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "tensor/dtype.h"

namespace ds::ref {

void rmsnorm(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps, float* y,
             int64_t ldy) {
  if (dim <= 0) return;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) {
      const float v = xr[i] * inv_rms;
      yr[i] = w ? v * w[i] : v;
    }
  }
}

void rmsnorm_f64(const float* x, int64_t n_rows, int64_t dim, const float* w, double eps, bool to_bf16,
                 float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double v = static_cast<double>(w[i]) * (xr[i] * inv_rms);
      yr[i] = to_bf16 ? round_to_bf16(v) : static_cast<float>(v);
    }
  }
}

void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(v[i]) * v[i];
  const double rho = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t o = 0; o < n_out; ++o) mixes[o] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* w = fn_t + i * n_out;
    const double vi = v[i];
    for (int64_t o = 0; o < n_out; ++o) mixes[o] += static_cast<double>(w[o]) * vi;
  }
  for (int64_t o = 0; o < n_out; ++o) mixes[o] *= rho;
}

void mhc_collapse(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x) {
  for (int64_t c = 0; c < hidden; ++c) {
    double acc = 0;
    for (int64_t k = 0; k < hc; ++k) acc += pre[k] * streams[k * hidden + c];
    x[c] = to_bf16 ? round_to_bf16(acc) : static_cast<float>(acc);
  }
}

void mhc_expand(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                int64_t hidden, bool to_bf16, float* out) {
  for (int64_t j = 0; j < hc; ++j) {
    for (int64_t c = 0; c < hidden; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < hc; ++i) acc += comb[i * hc + j] * streams[i * hidden + c];
      const double v = post[j] * f[c] + acc;
      out[j * hidden + c] = to_bf16 ? round_to_bf16(v) : static_cast<float>(v);
    }
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                 int64_t n_pairs) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_stride;
    for (int64_t i = 0; i < n_pairs; ++i) {
      const float re = xh[2 * i];
      const float im = xh[2 * i + 1];
      const float a = re * cos_v[i];
      const float b = im * sin_v[i];
      const float c = re * sin_v[i];
      const float d = im * cos_v[i];
      xh[2 * i] = a - b;
      xh[2 * i + 1] = c + d;
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    float u = up[i];
    if (limit > 0.0f) {
      // Written so that NaN passes through unchanged (a comparison with NaN is false).
      g = g > limit ? limit : g;
      u = u > limit ? limit : (u < -limit ? -limit : u);
    }
    const float silu = g / (1.0f + std::exp(-g));
    out[i] = silu * u;
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max_v = -std::numeric_limits<float>::infinity();
  bool has_nan = false;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) has_nan = true;
    max_v = x[i] > max_v ? x[i] : max_v;
  }
  if (has_nan) {
    // NaN anywhere poisons the normaliser; make that explicit and order-independent.
    std::fill(x, x + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  if (max_v == -std::numeric_limits<float>::infinity()) {
    std::fill(x, x + n, 0.0f);
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_v);
    sum += x[i];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

void topk(const float* scores, int64_t n, int64_t k, int32_t* out_idx, float* out_val) {
  k = std::min(k, n);
  if (k <= 0) return;
  // Strict weak order: larger value first; NaN after every number; ties (and NaN vs NaN) by index.
  auto before = [scores](int32_t a, int32_t b) {
    const float va = scores[a];
    const float vb = scores[b];
    const bool na = std::isnan(va);
    const bool nb = std::isnan(vb);
    if (na != nb) return nb;
    if (!na && va != vb) return va > vb;
    return a < b;
  };
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  for (int64_t i = 0; i < k; ++i) {
    out_idx[i] = idx[static_cast<size_t>(i)];
    if (out_val) out_val[i] = scores[out_idx[i]];
  }
}

}  // namespace ds::ref
