#include "model/moe.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"

namespace ds {

Result<Moe> Moe::load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& cfg, int block,
                      int32_t layer, const ExpertExchange* ep) {
  Moe m;
  m.hidden_ = cfg.hidden_size;
  m.expert_width_ = cfg.moe_intermediate_size;
  m.layer_ = layer;
  DS_ASSIGN_OR_RETURN(m.router_, RouterConfig::from_model_config(cfg));
  const int64_t E = m.router_.n_experts;
  DS_ASSIGN_OR_RETURN(m.gate_, load_linear_layer(ckpt, prefix + ".gate", E, cfg.hidden_size, block));
  const std::string bias_name = prefix + ".gate.e_score_correction_bias";
  // noaux_tc selects on s + b, so the bias is required there; V2-style routers have none.
  if (m.router_.group_rule == RouterGroupRule::noaux_tc || ckpt.find(bias_name) != nullptr) {
    DS_ASSIGN_OR_RETURN(m.bias_, load_f32(ckpt, bias_name, Shape{E}));
  }
  m.experts_.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    if (ep != nullptr && !ep->owns_expert(layer, static_cast<int32_t>(e))) continue;
    DS_ASSIGN_OR_RETURN(DenseMlp expert, DenseMlp::load(ckpt, prefix + ".experts." + std::to_string(e),
                                                        cfg.hidden_size, cfg.moe_intermediate_size, block));
    m.experts_[static_cast<size_t>(e)] = std::move(expert);
  }
  if (cfg.n_shared_experts > 0) {
    DS_ASSIGN_OR_RETURN(
        m.shared_,
        DenseMlp::load(ckpt, prefix + ".shared_experts", cfg.hidden_size,
                       static_cast<int64_t>(cfg.moe_intermediate_size) * cfg.n_shared_experts, block));
  }
  return m;
}

bool Moe::holds_expert(int32_t expert) const {
  return expert >= 0 && expert < n_routed_experts() &&
         experts_[static_cast<size_t>(expert)].intermediate() > 0;
}

void Moe::append_expert_bytes(int32_t expert, std::vector<std::byte>& out) const {
  DS_ASSERT(holds_expert(expert), "append_expert_bytes of an expert this rank does not hold");
  experts_[static_cast<size_t>(expert)].append_bytes(out);
}

Status Moe::load_expert_bytes(int32_t expert, std::span<const std::byte> bytes) {
  if (expert < 0 || expert >= n_routed_experts())
    return Status(ErrorCode::model_bad_input, "expert " + std::to_string(expert) + " out of range");
  DS_ASSIGN_OR_RETURN(experts_[static_cast<size_t>(expert)],
                      DenseMlp::from_bytes(bytes, hidden_, expert_width_));
  return Status();
}

void Moe::drop_expert(int32_t expert) {
  if (expert >= 0 && expert < n_routed_experts()) experts_[static_cast<size_t>(expert)] = DenseMlp();
}

void Moe::forward(const ForwardContext& ctx, const float* x, int64_t n_rows, MoeScratch& s,
                  float* out) const {
  if (n_rows == 0 && ctx.expert_exchange == nullptr) return;
  const int64_t H = hidden_;
  const int E = router_.n_experts;
  const int K = router_.top_k;

  // Routing: gate_logits [n_rows, E] -> expert ids and weights [n_rows, K].
  s.expert_idx.resize(static_cast<size_t>(n_rows * K));
  s.expert_w.resize(static_cast<size_t>(n_rows * K));
  if (n_rows > 0) {
    s.gate_logits.reshape(Shape{n_rows, E});
    linear(ctx, gate_.w, x, n_rows, H, s.gate_logits.data(), E);
    s.router.size_for(router_);
    for (int64_t t = 0; t < n_rows; ++t) {
      route_row(ctx.isa, router_, s.gate_logits.row(t), bias_.empty() ? nullptr : bias_.data(), s.router,
                s.expert_idx.data() + t * K, s.expert_w.data() + t * K);
    }
    if (shared_) {
      shared_->forward(ctx, x, n_rows, H, s.mlp, out, H);
    } else {
      std::memset(out, 0, static_cast<size_t>(n_rows * H) * sizeof(float));
    }
  }

  const RoutedChoices choices{x, n_rows, K, H, s.expert_idx.data(), s.expert_w.data(), layer_};
  s.y_choice.resize(static_cast<size_t>(n_rows * K * H));
  run_routed_experts(
      ctx, choices, E,
      [&](std::span<const ExpertRows> groups) {
        for (const ExpertRows& g : groups) {
          const DenseMlp& expert = experts_[static_cast<size_t>(g.expert)];
          DS_ASSERT(expert.intermediate() > 0, "rows sent to a rank that does not own their expert");
          expert.forward(ctx, g.x, g.n_rows, H, s.mlp, g.y, H);
        }
      },
      s.dispatch, s.y_choice.data());
  // out = shared(x) + Σ w · expert(x) in ascending expert id per row.
  combine_routed(choices, s.y_choice.data(), /*apply_weight=*/true, out);
}

}  // namespace ds
