#include "kernels/ref/v4_attention_ref.h"

#include <cmath>
#include <limits>

#include "tensor/dtype.h"

namespace ds::ref {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k) acc += a[k] * b[k];
  return acc;
}

}  // namespace

void compressor_entry(const CompressorArgs& a, int64_t entry) {
  const int64_t r = a.ratio;
  const int64_t base = (a.overlap && a.first_has_prev) ? r : 0;
  const int64_t cur0 = base + entry * r;  // first row of the current group
  const bool has_prev = a.overlap && (entry > 0 || a.first_has_prev);
  const int64_t prev0 = cur0 - r;
  const int64_t half = a.overlap ? a.d_c : 0;  // channel offset of the current group
  float* out = a.out + entry * a.ldo;          // out: [d_c]
  float e[2 * kCompressorMaxRatio];
  for (int64_t c = 0; c < a.d_c; ++c) {
    // Terms: previous group (channel c) first, then the current group (channel half + c).
    int64_t n_terms = 0;
    const float* zs[2 * kCompressorMaxRatio];
    const float* as[2 * kCompressorMaxRatio];
    if (has_prev) {
      for (int64_t t = 0; t < r; ++t) {
        zs[n_terms] = a.score + (prev0 + t) * a.ld + c;
        as[n_terms++] = a.kv + (prev0 + t) * a.ld + c;
      }
    }
    for (int64_t t = 0; t < r; ++t) {
      zs[n_terms] = a.score + (cur0 + t) * a.ld + half + c;
      as[n_terms++] = a.kv + (cur0 + t) * a.ld + half + c;
    }
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < n_terms; ++t) m = *zs[t] > m ? *zs[t] : m;
    float sum = 0.0f;
    for (int64_t t = 0; t < n_terms; ++t) {
      e[t] = std::exp(*zs[t] - m);
      sum += e[t];
    }
    float acc = 0.0f;
    for (int64_t t = 0; t < n_terms; ++t) {
      const float p = e[t] / sum;
      acc += p * *as[t];
    }
    out[c] = acc;
  }
}

void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                          float* scores_row) {
  const float* q = a.q + i * a.n_heads * a.head_dim;  // q: [n_heads, head_dim]
  const float* w = a.weights + i * a.n_heads;         // w: [n_heads]
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* k = a.keys + t * a.ldk;
    float score = 0.0f;
    for (int32_t h = 0; h < a.n_heads; ++h) {
      const float d = dot(q + h * a.head_dim, k, a.head_dim);
      const float relu = d > 0.0f ? d : 0.0f;
      score += a.round_bf16 ? round_to_bf16(w[h] * round_to_bf16(relu)) : w[h] * relu;
    }
    scores_row[t] = a.round_bf16 ? round_to_bf16(score) : score;
  }
}

void sparse_attention_head(const SparseAttentionArgs& a, int64_t i, int32_t h, float* scratch) {
  const float* q = a.q + (i * a.n_heads + h) * a.d;  // q: [d]
  float* out = a.out + (i * a.n_heads + h) * a.d;    // out: [d]
  const SparseKvSet* sets[2] = {&a.window, &a.compressed};
  // Pass 1: scores of the real keys in key order.
  int64_t n_keys = 0;
  for (const SparseKvSet* s : sets) {
    for (int64_t j = 0; j < s->n_idx; ++j) {
      const int32_t row = s->idx[i * s->n_idx + j];
      if (row < 0) continue;
      scratch[n_keys++] = a.scale * dot(q, s->kv + row * s->ld, a.d);
    }
  }
  for (int32_t c = 0; c < a.d; ++c) out[c] = 0.0f;
  if (n_keys == 0) return;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_keys; ++j) m = scratch[j] > m ? scratch[j] : m;
  float sum = 0.0f;
  for (int64_t j = 0; j < n_keys; ++j) {
    scratch[j] = std::exp(scratch[j] - m);
    sum += scratch[j];
  }
  if (a.sink != nullptr) sum += std::exp(a.sink[h] - m);
  // Pass 2: Σ r(e_j) · kv_j in the same key order, then one division.
  int64_t key = 0;
  for (const SparseKvSet* s : sets) {
    for (int64_t j = 0; j < s->n_idx; ++j) {
      const int32_t row = s->idx[i * s->n_idx + j];
      if (row < 0) continue;
      const float p = a.round_probs_bf16 ? round_to_bf16(scratch[key]) : scratch[key];
      ++key;
      const float* v = s->kv + row * s->ld;
      for (int32_t c = 0; c < a.d; ++c) out[c] += p * v[c];
    }
  }
  for (int32_t c = 0; c < a.d; ++c) out[c] /= sum;
}

}  // namespace ds::ref
