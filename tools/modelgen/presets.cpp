#include "presets.h"

#include <string>

namespace ds::modelgen {
namespace {

// Fields every preset shares with the released DeepSeek-V3 config.
ModelConfig v3_common() {
  ModelConfig c;
  c.model_type = "deepseek_v3";
  c.vocab_size = 129280;
  c.num_nextn_predict_layers = 1;
  c.moe_layer_freq = 1;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  c.scoring_func = "sigmoid";
  c.topk_method = "noaux_tc";
  c.hidden_act = "silu";
  c.max_position_embeddings = 163840;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000;
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 40;
  c.rope_scaling.original_max_position_embeddings = 4096;
  c.rope_scaling.beta_fast = 32;
  c.rope_scaling.beta_slow = 1;
  c.rope_scaling.mscale = 1;
  c.rope_scaling.mscale_all_dim = 1;
  c.tie_word_embeddings = false;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

ModelConfig tiny() {
  ModelConfig c = v3_common();
  c.hidden_size = 64;
  c.num_hidden_layers = 3;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 4;
  c.q_lora_rank = 48;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 16;
  c.v_head_dim = 16;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 32;
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 2;
  c.n_group = 4;
  c.topk_group = 2;
  return c;
}

ModelConfig small() {
  ModelConfig c = v3_common();
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 8;
  c.q_lora_rank = 192;
  c.kv_lora_rank = 128;
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 32;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 128;
  c.n_routed_experts = 16;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  return c;
}

// DeepSeek-V2-Lite widths with V3 routing; 3 layers + MTP keep it near 6 GB in BF16.
ModelConfig bench() {
  ModelConfig c = v3_common();
  c.hidden_size = 2048;
  c.num_hidden_layers = 3;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 16;
  c.q_lora_rank = 1536;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.intermediate_size = 10944;
  c.moe_intermediate_size = 1408;
  c.n_routed_experts = 64;
  c.n_shared_experts = 2;
  c.num_experts_per_tok = 6;
  c.n_group = 1;
  c.topk_group = 1;
  return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "small", "bench"}; }

Result<ModelConfig> deepseek_v3_preset(std::string_view preset, bool fp8) {
  ModelConfig c;
  if (preset == "tiny") {
    c = tiny();
  } else if (preset == "small") {
    c = small();
  } else if (preset == "bench") {
    c = bench();
  } else {
    return Status(ErrorCode::invalid_argument,
                  "unknown preset '" + std::string(preset) + "' (expected tiny, small or bench)");
  }
  c.num_key_value_heads = c.num_attention_heads;
  if (fp8) {
    c.quantization.quant_method = "fp8";
    c.quantization.fmt = "e4m3";
    c.quantization.activation_scheme = "dynamic";
    c.quantization.block_rows = 128;
    c.quantization.block_cols = 128;
  }
  return c;
}

}  // namespace ds::modelgen
