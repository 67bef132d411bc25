// config.json of a DeepSeek checkpoint (model_type deepseek_v3, deepseek_v32, deepseek_v4,
// deepseek_v41; V2-style `q_lora_rank: null`). Unknown keys are ignored; a missing or out-of-range
// required key is an error naming the file and the key. The V4 keys and checks live in
// model_config_v4.cpp, V4.1's wrapper and keys in model_config_v41.cpp.
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

// deepseek_v4: the kind of attention a layer runs, decided by its compress ratio exactly as the
// reference does (`overlap = ratio == 4`, indexer iff ratio == 4): 0 = sliding window only,
// kCsaCompressRatio = compressed sparse attention (overlapping groups + indexer top-k), any other
// positive ratio = heavily compressed attention (every visible entry).
enum class AttentionKind { sliding_window, csa, hca };
constexpr int kCsaCompressRatio = 4;

// V4-Flash-0731's DSpark drafter keys (absent from the base V4-Flash config).
struct DsparkConfig {
  std::vector<int> target_layer_ids;  // main layers whose states feed the drafter
  int block_size = 0;
  int noise_token_id = 0;
  int markov_rank = 0;
  int n_routed_experts = 0;     // V4.1: the stages' own expert count (0 = the main model's)
  int num_experts_per_tok = 0;  // V4.1: the stages' top-k (0 = the main model's)

  bool operator==(const DsparkConfig&) const = default;
};

// V4.1 Engram (model-spec §5.7): hashed n-gram embedding tables added to the streams before the
// listed layers. One table per layer; its rows are the sum of that layer's primes.
struct EngramConfig {
  std::vector<int> layer_ids;
  std::vector<int64_t> num_embeddings;  // rows of each layer's table
  int max_ngram_size = 0;               // n-grams 2..max_ngram_size
  int vocab_size = 0;                   // the primes start after engram_vocab_size - 1
  int n_heads = 0;
  int head_dim = 0;  // one table row
  int pad_token_id = 0;
  int compressed_vocab_size = 0;  // size of the normalised token map

  bool operator==(const EngramConfig&) const = default;
};

struct ModelConfig {
  std::string model_type;  // "deepseek_v3" | "deepseek_v32" | "deepseek_v2" | "deepseek_v4" | "deepseek_v41"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;      // dense layers' FFN width (0 in V4: every layer is MoE)
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
  std::string scoring_func = "sigmoid";  // "sigmoid" (V3), "softmax" (V2), "sqrtsoftplus" (V4)
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
  // deepseek_v32 (DSA indexer) and deepseek_v4 (CSA indexer); 0 when absent.
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;

  // ---- deepseek_v4 only (zero / empty otherwise) ----
  int head_dim = 0;     // per-head query width = the single shared K=V latent (MQA)
  int o_lora_rank = 0;  // grouped low-rank output: o_groups blocks of o_lora_rank each
  int o_groups = 0;
  int sliding_window = 0;  // window length in tokens (every layer, MTP included)
  // One entry per main layer, then one per draft (mtp.*) layer; 0 = window only.
  std::vector<int> compress_ratios;
  double compress_rope_theta = 0;  // RoPE base of layers with ratio > 0 (with rope_scaling)
  int num_hash_layers = 0;         // the first layers route by tid2eid[token] instead of scores
  int hc_mult = 0;                 // mHC residual streams
  int hc_sinkhorn_iters = 0;
  double hc_eps = 0;
  double swiglu_limit = 0;   // 0 = no clamp
  std::string expert_dtype;  // "fp4" (packed E2M1 routed experts) or empty (FP8 like the rest)
  std::optional<DsparkConfig> dspark;

  // ---- deepseek_v41 only (model-spec §2.2, §5; from `text_config` and the wrapper) ----
  std::vector<int> kv_source_layer_ids;     // layers that own a compressor; the rest read the latest
  std::vector<int> index_source_layer_ids;  // layers that compute top-k; the rest reuse the latest
  int candidate_source_layer_id = -1;       // -1: no two-level candidate pool
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  double gate_temp = 1.0;  // router logits are divided by it
  std::optional<EngramConfig> engram;
  int pad_token_id = -1;    // wrapper; -1 when absent
  int image_token_id = -1;  // wrapper; -1 when absent
  bool has_vision = false;  // the wrapper has a vision_config (its weights load and are skipped)

  bool operator==(const ModelConfig&) const = default;

  bool is_v4() const { return model_type == "deepseek_v4"; }
  bool is_v41() const { return model_type == "deepseek_v41"; }
  // V4 and V4.1 share the mHC/compressed-attention layout keys (head_dim, compress_ratios, ...).
  bool is_v4_family() const { return is_v4() || is_v41(); }
  // Draft layers stored after the main ones (V3 `model.layers.N`, V4 `mtp.K`). V4 counts them
  // from compress_ratios, which V4-Flash-0731 makes 3 long (its DSpark stages) while
  // num_nextn_predict_layers stays 1.
  int num_draft_layers() const {
    return is_v4_family() ? static_cast<int>(compress_ratios.size()) - num_hidden_layers
                          : num_nextn_predict_layers;
  }
  // V4: `layer` counts main layers then draft layers (the MTP block of V4-Flash is layer 43).
  int compress_ratio(int layer) const { return compress_ratios.at(static_cast<size_t>(layer)); }
  // V4.1 (CSA2): every layer with a ratio selects top-k entries of its source's cache.
  AttentionKind attention_kind(int layer) const {
    const int ratio = compress_ratio(layer);
    if (is_v41()) return ratio == 0 ? AttentionKind::sliding_window : AttentionKind::csa;
    return ratio == 0                   ? AttentionKind::sliding_window
           : ratio == kCsaCompressRatio ? AttentionKind::csa
                                        : AttentionKind::hca;
  }
  bool is_hash_layer(int layer) const { return layer < num_hash_layers; }
  // Least common multiple of the nonzero compress ratios (1 when there are none): a KV block
  // whose token count is a multiple of it never splits a compression group of any layer.
  int32_t kv_block_size_multiple() const;

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
// deepseek_v4 does not use intermediate_size, kv_lora_rank, qk_nope_head_dim, v_head_dim; it needs
// head_dim, q_lora_rank (> 0), o_lora_rank, o_groups, sliding_window, compress_ratios, hc_mult,
// hc_sinkhorn_iters, hc_eps, the MoE keys, compress_rope_theta when a ratio is > 0 and the index_*
// keys when a layer is CSA (docs/models.md lists every key and check).
// deepseek_v41 is the DeepseekV41ForCausalLM wrapper: the model keys in `text_config` (errors name
// `text_config.KEY`), the token ids, `quantization_config` (with expert_dtype) and `vision_config`
// at the top level; its source lists are checked against compress_ratios (layer_spec.h).
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& dir);
// Serialises the config back to HF-style JSON (make-model writes it; round-trips through parse).
std::string model_config_to_json(const ModelConfig& c);

}  // namespace ds
