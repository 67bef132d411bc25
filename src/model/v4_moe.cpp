#include "model/v4_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/assert.h"
#include "kernels/matmul.h"
#include "tensor/dtype.h"

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

// An expert as bytes: w1, w3, w2 (linear.h records), the order load_expert reads them.
void append_expert(const V4Expert& e, std::vector<std::byte>& out) {
  append_linear_bytes(e.w1, out);
  append_linear_bytes(e.w3, out);
  append_linear_bytes(e.w2, out);
}

Result<V4Expert> expert_from_bytes(std::span<const std::byte> in, int64_t hidden, int64_t width) {
  V4Expert e;
  e.width = width;
  size_t at = 0;
  DS_ASSIGN_OR_RETURN(e.w1, read_linear_bytes(in, at, width, hidden));
  DS_ASSIGN_OR_RETURN(e.w3, read_linear_bytes(in, at, width, hidden));
  DS_ASSIGN_OR_RETURN(e.w2, read_linear_bytes(in, at, hidden, width));
  if (at != in.size()) return Status(ErrorCode::model_bad_input, "expert record: trailing bytes");
  return e;
}

float softplus(float v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }

}  // namespace

Result<V4Moe> V4Moe::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                          int32_t layer, bool hash_layer, const ExpertExchange* ep) {
  V4Moe m;
  m.hidden_ = c.hidden_size;
  m.expert_width_ = c.moe_intermediate_size;
  m.layer_ = layer;
  m.n_experts_ = c.n_routed_experts;
  m.top_k_ = c.num_experts_per_tok;
  m.hash_ = hash_layer;
  m.norm_topk_ = c.norm_topk_prob;
  m.score_func_ = c.scoring_func;
  m.route_scale_ = static_cast<float>(c.routed_scaling_factor);
  m.limit_ = static_cast<float>(c.swiglu_limit);
  m.gate_temp_ = static_cast<float>(c.gate_temp);
  m.weight_norm_eps_ = c.is_v41() ? 1e-20f : 0.0f;
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
  if (c.is_v41() && layer < c.num_hidden_layers) {  // DSpark stages have none (docs/dspark.md)
    DS_ASSIGN_OR_RETURN(m.bias_vl_, load_f32_param(ckpt, prefix + "gate.bias_vl", Shape{m.n_experts_}));
  }
  m.experts_.resize(static_cast<size_t>(m.n_experts_));
  for (int64_t e = 0; e < m.n_experts_; ++e) {
    if (ep != nullptr && !ep->owns_expert(layer, static_cast<int32_t>(e))) continue;
    DS_ASSIGN_OR_RETURN(m.experts_[static_cast<size_t>(e)],
                        load_expert(ckpt, prefix + "experts." + std::to_string(e) + ".", m.hidden_,
                                    c.moe_intermediate_size, block));
  }
  if (c.n_shared_experts > 0) {
    DS_ASSIGN_OR_RETURN(V4Expert ex,
                        load_expert(ckpt, prefix + "shared_experts.", m.hidden_,
                                    int64_t{c.moe_intermediate_size} * c.n_shared_experts, block));
    m.shared_.push_back(std::move(ex));
  }
  return m;
}

bool V4Moe::holds_expert(int32_t expert) const {
  return expert >= 0 && expert < n_experts_ && experts_[static_cast<size_t>(expert)].width > 0;
}

void V4Moe::append_expert_bytes(int32_t expert, std::vector<std::byte>& out) const {
  DS_ASSERT(holds_expert(expert), "append_expert_bytes of an expert this rank does not hold");
  append_expert(experts_[static_cast<size_t>(expert)], out);
}

Status V4Moe::load_expert_bytes(int32_t expert, std::span<const std::byte> bytes) {
  if (expert < 0 || expert >= n_experts_)
    return Status(ErrorCode::model_bad_input, "expert " + std::to_string(expert) + " out of range");
  DS_ASSIGN_OR_RETURN(experts_[static_cast<size_t>(expert)],
                      expert_from_bytes(bytes, hidden_, expert_width_));
  return Status();
}

void V4Moe::drop_expert(int32_t expert) {
  if (expert >= 0 && expert < n_experts_) experts_[static_cast<size_t>(expert)] = V4Expert();
}

void V4Moe::run_experts(const ForwardContext& ctx, const V4Numerics& num, const std::vector<ExpertJob>& jobs,
                        V4Scratch& scratch) const {
  constexpr int64_t kColsPerTask = 64;
  // Job j's g, u, h: [m_j, width_j] at h_at[j] in the scratch buffers.
  std::vector<int64_t> h_at(jobs.size() + 1, 0);
  for (size_t j = 0; j < jobs.size(); ++j) h_at[j + 1] = h_at[j] + jobs[j].m * jobs[j].e->width;
  float* g_all = scratch_of(scratch.g, h_at.back());
  float* u_all = scratch_of(scratch.u, h_at.back());
  float* h_all = scratch_of(scratch.h, h_at.back());
  struct Task {
    size_t job;
    int64_t c0, c1;
  };
  std::vector<Task> tasks;
  auto split = [&](auto cols_of) {
    tasks.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
      const int64_t cols = cols_of(jobs[j]);
      for (int64_t c0 = 0; c0 < cols; c0 += kColsPerTask)
        tasks.push_back(Task{j, c0, std::min(cols, c0 + kColsPerTask)});
    }
  };
  // bf16 activations (MatmulArgs::x_bf16): each job's x is rounded once for all its column tasks,
  // and h where it is computed, instead of once per 64-column task inside the kernel.
  std::vector<uint16_t> xb, hb;
  std::vector<int64_t> x_at(jobs.size() + 1, 0);
  if (ctx.bf16_activations) {
    for (size_t j = 0; j < jobs.size(); ++j) x_at[j + 1] = x_at[j] + jobs[j].m * hidden_;
    xb.resize(static_cast<size_t>(x_at.back()));
    hb.resize(static_cast<size_t>(h_at.back()));
    ctx.pool->parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j) {
      const ExpertJob& jb = jobs[static_cast<size_t>(j)];
      round_rows_to_bf16(ctx.isa, jb.x, jb.m, hidden_, hidden_, xb.data() + x_at[static_cast<size_t>(j)]);
    });
  }
  split([](const ExpertJob& jb) { return jb.e->width; });
  ctx.pool->parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t ti) {
    const Task& t = tasks[static_cast<size_t>(ti)];
    const ExpertJob& jb = jobs[t.job];
    const int64_t w = jb.e->width;
    float* g = g_all + h_at[t.job];
    float* u = u_all + h_at[t.job];
    float* h = h_all + h_at[t.job];
    MatmulArgs a;
    a.x = jb.x;
    a.m = jb.m;
    a.ldx = hidden_;
    a.w = &jb.e->w1.w;
    a.y = g;
    a.ldy = w;
    a.bf16_activations = ctx.bf16_activations;
    a.x_bf16 = xb.empty() ? nullptr : xb.data() + x_at[t.job];
    matmul_cols(matmul_isa(ctx.isa, jb.e->w1.w), a, t.c0, t.c1);
    a.w = &jb.e->w3.w;
    a.y = u;
    matmul_cols(matmul_isa(ctx.isa, jb.e->w3.w), a, t.c0, t.c1);
    for (int64_t r = 0; r < jb.m; ++r) {
      for (int64_t i = t.c0; i < t.c1; ++i) {
        float gi = g[r * w + i], ui = u[r * w + i];
        if (jb.clamp && limit_ > 0) {
          ui = std::clamp(ui, -limit_, limit_);
          gi = std::min(gi, limit_);
        }
        float hi = gi / (1.0f + std::exp(-gi)) * ui;
        if (jb.weights != nullptr) hi *= jb.weights[r];
        h[r * w + i] = num.round(Bf16Point::expert_h, hi);
        if (!hb.empty()) hb[static_cast<size_t>(h_at[t.job] + r * w + i)] = f32_to_bf16(h[r * w + i]);
      }
    }
  });
  split([&](const ExpertJob&) { return hidden_; });
  ctx.pool->parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t ti) {
    const Task& t = tasks[static_cast<size_t>(ti)];
    const ExpertJob& jb = jobs[t.job];
    MatmulArgs a;
    a.x = h_all + h_at[t.job];
    a.m = jb.m;
    a.ldx = jb.e->width;
    a.w = &jb.e->w2.w;
    a.y = jb.y;
    a.ldy = hidden_;
    a.bf16_activations = ctx.bf16_activations;
    a.x_bf16 = hb.empty() ? nullptr : hb.data() + h_at[t.job];
    matmul_cols(matmul_isa(ctx.isa, jb.e->w2.w), a, t.c0, t.c1);
  });
}

void V4Moe::route(const float* logits, int32_t token, int32_t* chosen, float* weights) const {
  std::vector<float> scores(static_cast<size_t>(n_experts_));
  std::vector<float> tempered;
  const float* l = logits;
  if (gate_temp_ != 1.0f) {
    tempered.assign(logits, logits + n_experts_);
    for (float& v : tempered) v /= gate_temp_;
    l = tempered.data();
  }
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
    if (norm_topk_ && score_func_ != "softmax") weights[k] /= wsum + weight_norm_eps_;
    weights[k] *= route_scale_;
  }
}

void V4Moe::forward(const ForwardContext& ctx, const V4Numerics& num, const float* x, int64_t n,
                    const int32_t* tokens, float* out, V4Scratch& scratch) const {
  const int64_t d = hidden_, k_top = top_k_;
  float* logits = scratch_of(scratch.logits, n * n_experts_);
  if (n > 0) linear(ctx, gate_.w, x, n, d, logits, n_experts_);
  // chosen, weights: [n, top_k]
  std::vector<int32_t> chosen(static_cast<size_t>(n * k_top));
  float* weights = scratch_of(scratch.weights, n * k_top);
  for (int64_t t = 0; t < n; ++t)
    route(logits + t * n_experts_, tokens[t], chosen.data() + t * k_top, weights + t * k_top);
  // Each expert runs once over the rows that chose it (matmul rows are batch invariant, so a row's
  // result equals running it alone, here or on another rank); y_slot: [n, top_k, d] the expert
  // output for each choice, the weight already folded in before w2. The shared expert joins the
  // routed groups in the same two pool dispatches (the runner is called once per forward).
  const int64_t n_choices = n * k_top;
  const RoutedChoices choices{x, n, k_top, d, chosen.data(), weights, layer_};
  float* y_shared = scratch_of(scratch.y_shared, n * d);
  std::vector<ExpertJob> jobs;
  auto run_local = [&](std::span<const ExpertRows> groups) {
    for (const ExpertRows& g : groups) {
      const V4Expert& e = experts_[static_cast<size_t>(g.expert)];
      DS_ASSERT(e.width > 0, "rows sent to a rank that does not own their expert");
      jobs.push_back(ExpertJob{&e, g.x, g.n_rows, g.weight, true, g.y});
    }
    if (n > 0) {
      for (const V4Expert& e : shared_)
        jobs.push_back(ExpertJob{&e, x, n, nullptr, num.shared_expert_clamp, y_shared});
    }
    run_experts(ctx, num, jobs, scratch);
  };
  float* y_slot = scratch_of(scratch.y_slot, n_choices * d);  // every choice is written here
  run_routed_experts(ctx, choices, n_experts_, run_local, scratch.dispatch, y_slot);
  // Per row: the routed outputs in ascending expert id (the reference's order), the shared last.
  std::fill(out, out + n * d, 0.0f);
  combine_routed(choices, y_slot, /*apply_weight=*/false, out);
  if (!shared_.empty()) {
    for (int64_t i = 0; i < n * d; ++i) out[i] += y_shared[i];
  }
}

}  // namespace ds
