// config.json of a DeepSeek checkpoint (model_type deepseek_v3, deepseek_v32; V2-style
// `q_lora_rank: null`). Unknown keys are ignored; a missing or out-of-range required key is an
// error naming the file and the key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds {

struct RopeScaling {
  std::string type;  // "yarn" (the only one DeepSeek uses) — empty when absent
  double factor = 1.0;
  double original_max_position_embeddings = 4096;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1;
  double mscale_all_dim = 0;

  bool operator==(const RopeScaling&) const = default;
};

struct QuantizationConfig {
  std::string quant_method;  // "fp8" or empty (unquantised checkpoint)
  std::string fmt;           // "e4m3"
  std::string activation_scheme;
  std::string scale_fmt;  // "ue8m0" in V3.1/V3.2, else empty
  int block_rows = 128;
  int block_cols = 128;

  bool operator==(const QuantizationConfig&) const = default;
};

struct ModelConfig {
  std::string model_type;  // "deepseek_v3" | "deepseek_v32"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;      // dense layers' FFN width
  int moe_intermediate_size = 0;  // per routed/shared expert
  int num_hidden_layers = 0;
  int num_nextn_predict_layers = 0;  // MTP layers, stored after the main layers
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int q_lora_rank = 0;  // 0 when config says null: plain q_proj (V2-Lite form)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 1;
  int topk_group = 1;
  int first_k_dense_replace = 0;
  int moe_layer_freq = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  std::string scoring_func = "sigmoid";  // "sigmoid" (V3) or "softmax" (V2)
  std::string topk_method = "noaux_tc";  // "noaux_tc" | "group_limited_greedy" | "greedy"
  std::string hidden_act = "silu";
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int bos_token_id = 0;
  int eos_token_id = 1;
  QuantizationConfig quantization;
  // deepseek_v32 (DSA indexer); 0 when absent.
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;

  bool operator==(const ModelConfig&) const = default;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

// `source` names the file in errors ("DIR/config.json"). Required keys: model_type, vocab_size,
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, q_lora_rank (int or null),
// kv_lora_rank, qk_{nope,rope}_head_dim, v_head_dim, max_position_embeddings, rms_norm_eps; with
// n_routed_experts > 0 also moe_intermediate_size, num_experts_per_tok, n_shared_experts; for
// deepseek_v32 also index_n_heads, index_head_dim, index_topk. Other keys default as in the HF
// config classes (scoring_func/topk_method/norm_topk_prob default per model_type).
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& dir);
// Serialises the config back to HF-style JSON (make-model writes it; round-trips through parse).
std::string model_config_to_json(const ModelConfig& c);

}  // namespace ds
