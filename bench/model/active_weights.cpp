#include "active_weights.h"

#include <string_view>

#include "tensor_name.h"

namespace ds::bench {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// Scales (V3 weight_scale_inv, V4 .scale) are bytes to read but not parameters.
bool is_scale(std::string_view name) {
  return contains(name, "weight_scale_inv") || name.ends_with(".scale");
}

double matmul_params(const TensorInfo& t) {
  if (t.shape.rank != 2 || is_scale(t.name)) return 0;
  return static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
}

}  // namespace

ActiveWeights count_active_weights(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg) {
  ActiveWeights a;
  const double routed_fraction =
      cfg.n_routed_experts > 0 ? static_cast<double>(cfg.num_experts_per_tok) / cfg.n_routed_experts : 0.0;
  for (const TensorInfo& t : tensors) {
    const std::string_view name = t.name;
    const double bytes = static_cast<double>(t.nbytes);
    if (name == "lm_head.weight" || (starts_with(name, "lm_head.") && is_scale(name))) {
      a.head_bytes += bytes;
      a.head_params += matmul_params(t);
      continue;
    }
    if (name == "model.embed_tokens.weight") {
      // A lookup reads one row; the tied head (no lm_head tensor) reads all of it.
      const double rows = t.shape.rank >= 1 && t.shape[0] > 0 ? static_cast<double>(t.shape[0]) : 1.0;
      a.other_bytes += bytes / rows;
      if (cfg.tie_word_embeddings) {
        a.head_bytes += bytes;
        a.head_params += matmul_params(t);
      }
      continue;
    }
    if (name == "model.norm.weight") {
      a.other_bytes += bytes;
      continue;
    }
    std::string_view rest;
    const int layer = layer_index(name, rest, "model.layers.");
    if (layer < 0) {
      ++a.n_unclassified;
      a.other_bytes += bytes;
      continue;
    }
    if (layer >= cfg.num_hidden_layers) {
      ++a.n_mtp_tensors_excluded;
      continue;
    }
    if (starts_with(rest, "self_attn.")) {
      a.attention_bytes += bytes;
      a.body_params += matmul_params(t);
    } else if (starts_with(rest, "mlp.experts.")) {
      a.routed_bytes += bytes * routed_fraction;
      a.body_params += matmul_params(t) * routed_fraction;
    } else if (starts_with(rest, "mlp.")) {  // dense MLP, shared experts, router gate + bias
      a.dense_bytes += bytes;
      a.body_params += matmul_params(t);
    } else if (contains(rest, "layernorm")) {
      a.other_bytes += bytes;
    } else {
      ++a.n_unclassified;
      a.other_bytes += bytes;
    }
  }
  return a;
}

double mla_attention_flops_per_token(const ModelConfig& cfg, int64_t prompt_len) {
  if (prompt_len <= 0) return 0;
  // Σ_{p=0}^{L-1} (p + 1) / L = (L + 1) / 2 attended rows on average.
  const double avg_rows = (static_cast<double>(prompt_len) + 1.0) / 2.0;
  const double per_row = 2.0 * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + 2.0 * cfg.kv_lora_rank;
  return static_cast<double>(cfg.num_hidden_layers) * cfg.num_attention_heads * avg_rows * per_row;
}

double latent_cache_bytes(const ModelConfig& cfg, int64_t n_ctx) {
  return static_cast<double>(cfg.num_hidden_layers) * static_cast<double>(n_ctx) *
         (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * 4.0;
}

}  // namespace ds::bench
