#include "kernels/ref/attention_ref.h"

#include <cmath>
#include <limits>
#include <vector>

namespace ds::ref {
namespace {

// Softmax-weighted sum over the visible rows of one (query, head).
//   scores: [n_vis] (overwritten with exp(s − max)); rows(j) → value row j, v_dim floats.
template <typename ValueRow>
void weighted_sum(float* scores, int64_t n_vis, int64_t v_dim, ValueRow value_row, float* out) {
  for (int64_t e = 0; e < v_dim; ++e) out[e] = 0.0f;
  if (n_vis == 0) return;
  float max_s = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_vis; ++j) max_s = scores[j] > max_s ? scores[j] : max_s;
  float sum = 0.0f;
  for (int64_t j = 0; j < n_vis; ++j) {
    scores[j] = std::exp(scores[j] - max_s);
    sum += scores[j];
  }
  for (int64_t j = 0; j < n_vis; ++j) {
    const float* v = value_row(j);
    for (int64_t e = 0; e < v_dim; ++e) out[e] += scores[j] * v[e];
  }
  const float inv_sum = 1.0f / sum;
  for (int64_t e = 0; e < v_dim; ++e) out[e] *= inv_sum;
}

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

void mla_attention_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a) {
  const int64_t qk_dim = a.latent_dim + a.rope_dim;
  pool.parallel_for(a.n_q * a.n_heads, [&](int64_t task) {
    const int64_t i = task / a.n_heads;
    const int64_t h = task % a.n_heads;
    const float* q = a.q + (i * a.n_heads + h) * qk_dim;
    const int64_t n_vis = std::min<int64_t>(a.q_pos[i] + 1, a.n_ctx);
    auto row = [&](int64_t j) { return a.block_rows[j / a.block_size] + (j % a.block_size) * qk_dim; };
    std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(n_vis, 0)));
    for (int64_t j = 0; j < n_vis; ++j) scores[j] = a.scale * dot(q, row(j), qk_dim);
    weighted_sum(scores.data(), std::max<int64_t>(n_vis, 0), a.latent_dim, row,
                 a.out + (i * a.n_heads + h) * a.latent_dim);
  });
}

void mha_attention(ThreadPool& pool, const MhaArgs& a) {
  pool.parallel_for(a.n_q * a.n_heads, [&](int64_t task) {
    const int64_t i = task / a.n_heads;
    const int64_t h = task % a.n_heads;
    const float* q = a.q + (i * a.n_heads + h) * a.qk_dim;
    std::vector<int64_t> visible;
    for (int64_t j = 0; j < a.n_kv; ++j)
      if (a.kv_pos[j] <= a.q_pos[i]) visible.push_back(j);
    const int64_t n_vis = static_cast<int64_t>(visible.size());
    std::vector<float> scores(visible.size());
    for (int64_t t = 0; t < n_vis; ++t)
      scores[t] = a.scale * dot(q, a.k + (visible[t] * a.n_heads + h) * a.qk_dim, a.qk_dim);
    weighted_sum(
        scores.data(), n_vis, a.v_dim,
        [&](int64_t t) { return a.v + (visible[t] * a.n_heads + h) * a.v_dim; },
        a.out + (i * a.n_heads + h) * a.v_dim);
  });
}

}  // namespace ds::ref
