#include "model/moe.h"

#include <algorithm>
#include <cstring>

namespace ds {

Result<Moe> Moe::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& cfg, int block) {
  Moe m;
  m.hidden_ = cfg.hidden_size;
  DS_ASSIGN_OR_RETURN(m.router_, RouterConfig::from_model_config(cfg));
  const int64_t E = m.router_.n_experts;
  DS_ASSIGN_OR_RETURN(m.gate_, load_linear_layer(ckpt, prefix + ".gate", E, cfg.hidden_size, block));
  const std::string bias_name = prefix + ".gate.e_score_correction_bias";
  // noaux_tc selects on s + b, so the bias is required there; V2-style routers have none.
  if (m.router_.group_rule == RouterGroupRule::noaux_tc || ckpt.find(bias_name) != nullptr) {
    DS_ASSIGN_OR_RETURN(m.bias_, load_f32(ckpt, bias_name, Shape{E}));
  }
  m.experts_.reserve(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    DS_ASSIGN_OR_RETURN(DenseMlp expert, DenseMlp::load(ckpt, prefix + ".experts." + std::to_string(e),
                                                        cfg.hidden_size, cfg.moe_intermediate_size, block));
    m.experts_.push_back(std::move(expert));
  }
  if (cfg.n_shared_experts > 0) {
    DS_ASSIGN_OR_RETURN(
        m.shared_,
        DenseMlp::load(ckpt, prefix + ".shared_experts", cfg.hidden_size,
                       static_cast<int64_t>(cfg.moe_intermediate_size) * cfg.n_shared_experts, block));
  }
  return m;
}

void Moe::forward(const ForwardContext& ctx, const float* x, int64_t n_rows, MoeScratch& s,
                  float* out) const {
  if (n_rows == 0) return;
  const int64_t H = hidden_;
  const int E = router_.n_experts;
  const int K = router_.top_k;

  // Routing: gate_logits [n_rows, E] -> expert ids and weights [n_rows, K].
  s.gate_logits.reshape(Shape{n_rows, E});
  linear(ctx, gate_.w, x, n_rows, H, s.gate_logits.data(), E);
  s.router.size_for(router_);
  s.expert_idx.resize(static_cast<size_t>(n_rows * K));
  s.expert_w.resize(static_cast<size_t>(n_rows * K));
  for (int64_t t = 0; t < n_rows; ++t) {
    route_row(ctx.isa, router_, s.gate_logits.row(t), bias_.empty() ? nullptr : bias_.data(), s.router,
              s.expert_idx.data() + t * K, s.expert_w.data() + t * K);
  }

  // Group the (row, weight) slots by expert (counting sort; rows stay ascending within an expert).
  s.slot_begin.assign(static_cast<size_t>(E) + 1, 0);
  for (int32_t e : s.expert_idx) ++s.slot_begin[static_cast<size_t>(e) + 1];
  for (int e = 0; e < E; ++e)
    s.slot_begin[static_cast<size_t>(e) + 1] += s.slot_begin[static_cast<size_t>(e)];
  s.fill.assign(s.slot_begin.begin(), s.slot_begin.end() - 1);
  s.slot_row.resize(static_cast<size_t>(n_rows * K));
  s.slot_w.resize(static_cast<size_t>(n_rows * K));
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int k = 0; k < K; ++k) {
      const int32_t e = s.expert_idx[static_cast<size_t>(t * K + k)];
      const int32_t slot = s.fill[static_cast<size_t>(e)]++;
      s.slot_row[static_cast<size_t>(slot)] = static_cast<int32_t>(t);
      s.slot_w[static_cast<size_t>(slot)] = s.expert_w[static_cast<size_t>(t * K + k)];
    }
  }

  if (shared_) {
    shared_->forward(ctx, x, n_rows, H, s.mlp, out, H);
  } else {
    std::memset(out, 0, static_cast<size_t>(n_rows * H) * sizeof(float));
  }

  for (int e = 0; e < E; ++e) {
    const int32_t begin = s.slot_begin[static_cast<size_t>(e)];
    const int32_t n_e = s.slot_begin[static_cast<size_t>(e) + 1] - begin;
    if (n_e == 0) continue;
    // xe: [n_e, H] gathered rows; ye: [n_e, H]
    s.xe.reshape(Shape{n_e, H});
    s.ye.reshape(Shape{n_e, H});
    for (int32_t i = 0; i < n_e; ++i) {
      std::memcpy(s.xe.row(i), x + s.slot_row[static_cast<size_t>(begin + i)] * H,
                  static_cast<size_t>(H) * sizeof(float));
    }
    experts_[static_cast<size_t>(e)].forward(ctx, s.xe.data(), n_e, H, s.mlp, s.ye.data(), H);
    for (int32_t i = 0; i < n_e; ++i) {
      float* dst = out + s.slot_row[static_cast<size_t>(begin + i)] * H;
      const float w = s.slot_w[static_cast<size_t>(begin + i)];
      const float* src = s.ye.row(i);
      for (int64_t j = 0; j < H; ++j) dst[j] += w * src[j];
    }
  }
}

}  // namespace ds
