#include "model/v4_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ds {

namespace {

Result<V4Expert> load_expert(const Checkpoint& ckpt, const std::string& p, int64_t hidden, int64_t width,
                             int block) {
  V4Expert e;
  e.width = width;
  DS_ASSIGN_OR_RETURN(e.w1, load_linear_layer(ckpt, p + "w1", width, hidden, block));
  DS_ASSIGN_OR_RETURN(e.w3, load_linear_layer(ckpt, p + "w3", width, hidden, block));
  DS_ASSIGN_OR_RETURN(e.w2, load_linear_layer(ckpt, p + "w2", hidden, width, block));
  return e;
}

float softplus(float v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }

}  // namespace

Result<V4Moe> V4Moe::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                          bool hash_layer) {
  V4Moe m;
  m.hidden_ = c.hidden_size;
  m.n_experts_ = c.n_routed_experts;
  m.top_k_ = c.num_experts_per_tok;
  m.hash_ = hash_layer;
  m.norm_topk_ = c.norm_topk_prob;
  m.score_func_ = c.scoring_func;
  m.route_scale_ = static_cast<float>(c.routed_scaling_factor);
  m.limit_ = static_cast<float>(c.swiglu_limit);
  if (m.score_func_ != "sqrtsoftplus" && m.score_func_ != "sigmoid" && m.score_func_ != "softmax") {
    return Status(ErrorCode::model_unsupported, "config.json: scoring_func '" + m.score_func_ + "'");
  }
  const int block = c.quantization.block_rows > 0 ? c.quantization.block_rows : 128;
  DS_ASSIGN_OR_RETURN(m.gate_, load_linear_layer(ckpt, prefix + "gate", m.n_experts_, m.hidden_, block));
  if (hash_layer) {
    DS_ASSIGN_OR_RETURN(m.tid2eid_, load_expert_id_table(ckpt, prefix + "gate.tid2eid", c.vocab_size,
                                                         m.top_k_, m.n_experts_));
  } else {
    DS_ASSIGN_OR_RETURN(m.bias_, load_f32_param(ckpt, prefix + "gate.bias", Shape{m.n_experts_}));
  }
  for (int64_t e = 0; e < m.n_experts_; ++e) {
    DS_ASSIGN_OR_RETURN(V4Expert ex, load_expert(ckpt, prefix + "experts." + std::to_string(e) + ".",
                                                 m.hidden_, c.moe_intermediate_size, block));
    m.experts_.push_back(std::move(ex));
  }
  if (c.n_shared_experts > 0) {
    DS_ASSIGN_OR_RETURN(V4Expert ex,
                        load_expert(ckpt, prefix + "shared_experts.", m.hidden_,
                                    int64_t{c.moe_intermediate_size} * c.n_shared_experts, block));
    m.shared_.push_back(std::move(ex));
  }
  return m;
}

void V4Moe::expert(const ForwardContext& ctx, const V4Numerics& num, const V4Expert& e, const float* x,
                   int64_t m, const float* weights, bool clamp, float* y) const {
  // g, u, h: [m, width]
  const int64_t w = e.width;
  std::vector<float> g(static_cast<size_t>(m * w)), u(g.size()), h(g.size());
  linear(ctx, e.w1.w, x, m, hidden_, g.data(), w);
  linear(ctx, e.w3.w, x, m, hidden_, u.data(), w);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < w; ++i) {
      float gi = g[r * w + i], ui = u[r * w + i];
      if (clamp && limit_ > 0) {
        ui = std::clamp(ui, -limit_, limit_);
        gi = std::min(gi, limit_);
      }
      float hi = gi / (1.0f + std::exp(-gi)) * ui;
      if (weights != nullptr) hi *= weights[r];
      h[r * w + i] = num.round(hi);
    }
  }
  linear(ctx, e.w2.w, h.data(), m, w, y, hidden_);
}

void V4Moe::route(const float* logits, int32_t token, int32_t* chosen, float* weights) const {
  std::vector<float> scores(static_cast<size_t>(n_experts_));
  const float* l = logits;
  if (score_func_ == "softmax") {
    const float mx = *std::max_element(l, l + n_experts_);
    float s = 0;
    for (int64_t e = 0; e < n_experts_; ++e) s += (scores[e] = std::exp(l[e] - mx));
    for (float& v : scores) v /= s;
  } else {
    for (int64_t e = 0; e < n_experts_; ++e)
      scores[e] = score_func_ == "sigmoid" ? 1.0f / (1.0f + std::exp(-l[e])) : std::sqrt(softplus(l[e]));
  }
  if (hash_) {
    std::copy_n(tid2eid_.data() + static_cast<int64_t>(token) * top_k_, top_k_, chosen);
  } else {
    std::vector<int32_t> order(static_cast<size_t>(n_experts_));
    std::iota(order.begin(), order.end(), 0);
    // Highest biased score first, ties to the lower expert id; the bias only selects.
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return scores[a] + bias_[a] > scores[b] + bias_[b]; });
    std::copy_n(order.begin(), top_k_, chosen);
  }
  float wsum = 0;
  for (int64_t k = 0; k < top_k_; ++k) wsum += (weights[k] = scores[chosen[k]]);
  for (int64_t k = 0; k < top_k_; ++k) {
    if (norm_topk_ && score_func_ != "softmax") weights[k] /= wsum;
    weights[k] *= route_scale_;
  }
}

void V4Moe::forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
                    const int32_t* tokens, float* out) const {
  const int64_t d = hidden_, k_top = top_k_;
  std::vector<float> logits(static_cast<size_t>(n * n_experts_));
  linear(ctx, gate_.w, x, n, d, logits.data(), n_experts_);
  // chosen, weights: [n, top_k]
  std::vector<int32_t> chosen(static_cast<size_t>(n * k_top));
  std::vector<float> weights(chosen.size());
  for (int64_t t = 0; t < n; ++t)
    route(logits.data() + t * n_experts_, tokens[t], chosen.data() + t * k_top, weights.data() + t * k_top);
  // Each expert runs once over the rows that chose it (matmul rows are batch invariant, so a row's
  // result equals running it alone); y_slot: [n, top_k, d] the expert output for each choice.
  std::vector<float> y_slot(static_cast<size_t>(n * k_top * d));
  std::vector<float> xs, ws, ys;
  std::vector<int64_t> slots;
  for (int64_t e = 0; e < n_experts_; ++e) {
    slots.clear();
    for (int64_t i = 0; i < n * k_top; ++i)
      if (chosen[i] == e) slots.push_back(i);
    if (slots.empty()) continue;
    const int64_t m = static_cast<int64_t>(slots.size());
    xs.resize(static_cast<size_t>(m * d));
    ws.resize(static_cast<size_t>(m));
    ys.resize(static_cast<size_t>(m * d));
    for (int64_t r = 0; r < m; ++r) {
      std::copy_n(x + (slots[r] / k_top) * d, d, xs.data() + r * d);
      ws[r] = weights[slots[r]];
    }
    expert(ctx, num, experts_[e], xs.data(), m, ws.data(), true, ys.data());
    for (int64_t r = 0; r < m; ++r) std::copy_n(ys.data() + r * d, d, y_slot.data() + slots[r] * d);
  }
  std::vector<float> y_shared(static_cast<size_t>(n * d));
  for (const V4Expert& e : shared_)
    expert(ctx, num, e, x, n, nullptr, num.shared_expert_clamp, y_shared.data());
  // Per row: the routed outputs in ascending expert id (the reference's order), the shared last.
  std::vector<int64_t> order(static_cast<size_t>(k_top));
  for (int64_t t = 0; t < n; ++t) {
    std::iota(order.begin(), order.end(), 0);
    const int32_t* c = chosen.data() + t * k_top;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return c[a] < c[b]; });
    float* o = out + t * d;
    std::fill(o, o + d, 0.0f);
    for (int64_t s : order) {
      const float* y = y_slot.data() + (t * k_top + s) * d;
      for (int64_t i = 0; i < d; ++i) o[i] += y[i];
    }
    if (!shared_.empty()) {
      for (int64_t i = 0; i < d; ++i) o[i] += y_shared[t * d + i];
    }
  }
}

}  // namespace ds
