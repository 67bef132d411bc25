#include "weights/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/mapped_file.h"
#include "weights/config_key_reader.h"

namespace ds {

namespace {

using config_detail::IntRange;
using config_detail::Json;
using config_detail::KeyReader;

Status parse_rope_scaling(const Json& obj, const std::string& source, const std::string& prefix,
                          RopeScaling& rs) {
  auto it = obj.find("rope_scaling");
  if (it == obj.end() || it->is_null()) return ok_status();
  if (!it->is_object()) {
    return Status(ErrorCode::weights_bad_config,
                  source + ": " + prefix + "rope_scaling: must be an object or null");
  }
  KeyReader r(*it, source, prefix + "rope_scaling.");
  // Newer HF configs spell the key `rope_type`.
  DS_TRY(r.get_string(r.find("rope_type") && !r.find("type") ? "rope_type" : "type", true, rs.type));
  if (rs.type != "yarn") return r.error("type", "'" + rs.type + "' is not supported (expected yarn)");
  DS_TRY(r.get_double("factor", true, rs.factor));
  if (!(rs.factor >= 1)) return r.error("factor", "must be >= 1");
  DS_TRY(r.get_double("original_max_position_embeddings", true, rs.original_max_position_embeddings));
  if (!(rs.original_max_position_embeddings > 0)) {
    return r.error("original_max_position_embeddings", "must be positive");
  }
  DS_TRY(r.get_double("beta_fast", false, rs.beta_fast));
  DS_TRY(r.get_double("beta_slow", false, rs.beta_slow));
  if (!(rs.beta_slow > 0)) return r.error("beta_slow", "must be positive");
  if (!(rs.beta_fast >= rs.beta_slow)) return r.error("beta_fast", "must be >= beta_slow");
  DS_TRY(r.get_double("mscale", false, rs.mscale));
  DS_TRY(r.get_double("mscale_all_dim", false, rs.mscale_all_dim));
  if (rs.mscale < 0) return r.error("mscale", "must be non-negative");
  if (rs.mscale_all_dim < 0) return r.error("mscale_all_dim", "must be non-negative");
  return ok_status();
}

Status parse_quantization_impl(const Json& root, const std::string& source, QuantizationConfig& q) {
  auto it = root.find("quantization_config");
  if (it == root.end() || it->is_null()) return ok_status();
  if (!it->is_object()) {
    return Status(ErrorCode::weights_bad_config, source + ": quantization_config: must be an object or null");
  }
  KeyReader r(*it, source, "quantization_config.");
  DS_TRY(r.get_string("quant_method", true, q.quant_method));
  if (q.quant_method != "fp8") {
    return r.error("quant_method", "'" + q.quant_method + "' is not supported (expected fp8)");
  }
  q.fmt = "e4m3";
  DS_TRY(r.get_choice("fmt", {"e4m3"}, q.fmt));
  DS_TRY(r.get_string("activation_scheme", false, q.activation_scheme));
  DS_TRY(r.get_string("scale_fmt", false, q.scale_fmt));
  if (const Json* b = r.find("weight_block_size")) {
    const char* want = "must be [rows, cols] of positive integers";
    if (!b->is_array() || b->size() != 2) return r.error("weight_block_size", want);
    int dims[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const Json& d = (*b)[static_cast<size_t>(i)];
      // A huge unsigned value converts to a negative int64 and is rejected too.
      if (!d.is_number_integer() || d.get<int64_t>() <= 0 || d.get<int64_t>() > (1 << 20)) {
        return r.error("weight_block_size", want);
      }
      dims[i] = static_cast<int>(d.get<int64_t>());
    }
    q.block_rows = dims[0];
    q.block_cols = dims[1];
  }
  return ok_status();
}

Status check_moe(const KeyReader& r, const ModelConfig& c) {
  if (c.num_experts_per_tok > c.n_routed_experts) {
    return r.error("num_experts_per_tok",
                   "must be <= n_routed_experts (" + std::to_string(c.n_routed_experts) + ")");
  }
  if (c.n_routed_experts % c.n_group != 0) {
    return r.error("n_group", "must divide n_routed_experts (" + std::to_string(c.n_routed_experts) + ")");
  }
  if (c.topk_group > c.n_group) {
    return r.error("topk_group", "must be <= n_group (" + std::to_string(c.n_group) + ")");
  }
  // Group-limited selection picks the top experts inside the kept groups, so they must hold enough.
  const int64_t kept_experts = static_cast<int64_t>(c.topk_group) * (c.n_routed_experts / c.n_group);
  if (c.topk_method != "greedy" && c.num_experts_per_tok > kept_experts) {
    return r.error("num_experts_per_tok", "must be <= topk_group * n_routed_experts / n_group (" +
                                              std::to_string(kept_experts) + ")");
  }
  return ok_status();
}

}  // namespace

namespace config_detail {

Status parse_quantization(const Json& root, const std::string& source, QuantizationConfig& q) {
  return parse_quantization_impl(root, source, q);
}

Status parse_common_keys(const Json& obj, const std::string& source, const std::string& prefix,
                         ModelConfig& c) {
  KeyReader r(obj, source, prefix);
  const bool v2 = c.model_type == "deepseek_v2";
  // V4/V4.1 have no dense layers and no MLA up-projections: those V3 keys are not in its config.
  const bool v4 = c.is_v4_family();
  if (v4) {
    c.scoring_func = "sqrtsoftplus";
    c.num_key_value_heads = 1;
  }
  // HF DeepseekV2Config defaults differ from V3's.
  if (v2) {
    c.scoring_func = "softmax";
    c.topk_method = "greedy";
    c.norm_topk_prob = false;
  }

  DS_TRY(r.get_int("vocab_size", IntRange::positive, true, c.vocab_size));
  DS_TRY(r.get_int("hidden_size", IntRange::positive, true, c.hidden_size));
  DS_TRY(r.get_int("intermediate_size", IntRange::positive, !v4, c.intermediate_size));
  DS_TRY(r.get_int("num_hidden_layers", IntRange::positive, true, c.num_hidden_layers));
  DS_TRY(r.get_int("num_nextn_predict_layers", IntRange::non_negative, false, c.num_nextn_predict_layers));
  DS_TRY(r.get_int("num_attention_heads", IntRange::positive, true, c.num_attention_heads));
  if (!v4) c.num_key_value_heads = c.num_attention_heads;
  DS_TRY(r.get_int("num_key_value_heads", IntRange::positive, false, c.num_key_value_heads));
  if (obj.find("q_lora_rank") == obj.end()) return r.error("q_lora_rank", "missing required key");
  DS_TRY(r.get_int("q_lora_rank", IntRange::non_negative, false, c.q_lora_rank));  // null -> 0
  DS_TRY(r.get_int("kv_lora_rank", IntRange::positive, !v4, c.kv_lora_rank));
  DS_TRY(r.get_int("qk_nope_head_dim", IntRange::positive, !v4, c.qk_nope_head_dim));
  DS_TRY(r.get_int("qk_rope_head_dim", IntRange::positive, true, c.qk_rope_head_dim));
  if (c.qk_rope_head_dim % 2 != 0) return r.error("qk_rope_head_dim", "must be even (RoPE rotates pairs)");
  DS_TRY(r.get_int("v_head_dim", IntRange::positive, !v4, c.v_head_dim));

  DS_TRY(r.get_int("n_routed_experts", v4 ? IntRange::positive : IntRange::non_negative, v4,
                   c.n_routed_experts));
  const bool moe = c.n_routed_experts > 0;
  DS_TRY(r.get_int("moe_intermediate_size", IntRange::positive, moe, c.moe_intermediate_size));
  DS_TRY(r.get_int("n_shared_experts", IntRange::non_negative, moe, c.n_shared_experts));
  DS_TRY(r.get_int("num_experts_per_tok", IntRange::positive, moe, c.num_experts_per_tok));
  DS_TRY(r.get_int("n_group", IntRange::positive, false, c.n_group));
  DS_TRY(r.get_int("topk_group", IntRange::positive, false, c.topk_group));
  DS_TRY(r.get_int("first_k_dense_replace", IntRange::non_negative, false, c.first_k_dense_replace));
  if (c.first_k_dense_replace > c.num_hidden_layers) {
    return r.error("first_k_dense_replace",
                   "must be <= num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ")");
  }
  DS_TRY(r.get_int("moe_layer_freq", IntRange::positive, false, c.moe_layer_freq));
  DS_TRY(r.get_bool("norm_topk_prob", c.norm_topk_prob));
  DS_TRY(r.get_double("routed_scaling_factor", false, c.routed_scaling_factor));
  if (!(c.routed_scaling_factor > 0)) return r.error("routed_scaling_factor", "must be positive");
  if (v4) {
    DS_TRY(r.get_choice("scoring_func", {"sqrtsoftplus", "sigmoid", "softmax"}, c.scoring_func));
  } else {
    DS_TRY(r.get_choice("scoring_func", {"sigmoid", "softmax"}, c.scoring_func));
  }
  DS_TRY(r.get_choice("topk_method", {"noaux_tc", "group_limited_greedy", "greedy"}, c.topk_method));
  if (moe) DS_TRY(check_moe(r, c));

  DS_TRY(r.get_choice("hidden_act", {"silu"}, c.hidden_act));
  DS_TRY(r.get_int("max_position_embeddings", IntRange::positive, true, c.max_position_embeddings));
  DS_TRY(r.get_double("rms_norm_eps", true, c.rms_norm_eps));
  if (!(c.rms_norm_eps > 0)) return r.error("rms_norm_eps", "must be positive");
  DS_TRY(r.get_double("rope_theta", false, c.rope_theta));
  if (!(c.rope_theta > 0)) return r.error("rope_theta", "must be positive");
  DS_TRY(parse_rope_scaling(obj, source, prefix, c.rope_scaling));
  DS_TRY(r.get_bool("tie_word_embeddings", c.tie_word_embeddings));
  DS_TRY(r.get_int("bos_token_id", IntRange::non_negative, false, c.bos_token_id));
  DS_TRY(r.get_int("eos_token_id", IntRange::non_negative, false, c.eos_token_id));
  if (c.bos_token_id >= c.vocab_size) return r.error("bos_token_id", "must be < vocab_size");
  if (c.eos_token_id >= c.vocab_size) return r.error("eos_token_id", "must be < vocab_size");
  return ok_status();
}

}  // namespace config_detail

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source) {
  const Json root = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status(ErrorCode::weights_bad_config, source + ": not valid JSON");
  if (!root.is_object()) return Status(ErrorCode::weights_bad_config, source + ": not a JSON object");
  KeyReader r(root, source);
  ModelConfig c;
  if (r.find("model_type") == nullptr) return r.error("model_type", "missing required key");
  DS_TRY(r.get_choice("model_type",
                      {"deepseek_v3", "deepseek_v32", "deepseek_v2", "deepseek_v4", "deepseek_v41"},
                      c.model_type));
  // V4.1 is a wrapper (text_config, vision_config): model_config_v41.cpp.
  if (c.is_v41()) return config_detail::parse_deepseek_v41(root, source);
  DS_TRY(config_detail::parse_common_keys(root, source, "", c));
  DS_TRY(config_detail::parse_quantization(root, source, c.quantization));
  if (c.model_type == "deepseek_v32") {
    DS_TRY(r.get_int("index_n_heads", IntRange::positive, true, c.index_n_heads));
    DS_TRY(r.get_int("index_head_dim", IntRange::positive, true, c.index_head_dim));
    DS_TRY(r.get_int("index_topk", IntRange::positive, true, c.index_topk));
  }
  if (c.is_v4()) DS_TRY(config_detail::parse_deepseek_v4_keys(root, source, "", c));
  return c;
}

Result<ModelConfig> load_model_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  DS_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_model_config(text, path);
}

int32_t ModelConfig::kv_block_size_multiple() const {
  int64_t multiple = 1;
  for (int ratio : compress_ratios) {
    // A parsed config has an lcm of at most 2^16 (model_config_v4.cpp); the clamp only keeps a
    // config built in code from overflowing int64.
    if (ratio > 0) multiple = std::min<int64_t>(std::lcm(multiple, int64_t{ratio}), INT32_MAX);
  }
  return static_cast<int32_t>(multiple);
}

std::string model_config_to_json(const ModelConfig& c) {
  if (c.is_v41()) {
    return config_detail::deepseek_v41_to_json(c).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  if (c.is_v4()) {
    return config_detail::deepseek_v4_to_json(c).dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  Json j = Json::object();
  j["architectures"] = Json::array({c.model_type == "deepseek_v2"    ? "DeepseekV2ForCausalLM"
                                    : c.model_type == "deepseek_v32" ? "DeepseekV32ForCausalLM"
                                                                     : "DeepseekV3ForCausalLM"});
  j["model_type"] = c.model_type;
  j["torch_dtype"] = "bfloat16";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  // Keys that must be positive when present are written as null when unset (dense models).
  auto positive_or_null = [](int v) { return v == 0 ? Json(nullptr) : Json(v); };
  j["moe_intermediate_size"] = positive_or_null(c.moe_intermediate_size);
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["q_lora_rank"] = positive_or_null(c.q_lora_rank);
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_experts_per_tok"] = positive_or_null(c.num_experts_per_tok);
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  j["moe_layer_freq"] = c.moe_layer_freq;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["scoring_func"] = c.scoring_func;
  j["topk_method"] = c.topk_method;
  j["hidden_act"] = c.hidden_act;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    const RopeScaling& rs = c.rope_scaling;
    j["rope_scaling"] = {{"type", rs.type},
                         {"factor", rs.factor},
                         {"original_max_position_embeddings", rs.original_max_position_embeddings},
                         {"beta_fast", rs.beta_fast},
                         {"beta_slow", rs.beta_slow},
                         {"mscale", rs.mscale},
                         {"mscale_all_dim", rs.mscale_all_dim}};
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (c.quantization.quant_method == "fp8") {
    const QuantizationConfig& q = c.quantization;
    Json qj = {{"quant_method", q.quant_method},
               {"fmt", q.fmt},
               {"weight_block_size", Json::array({q.block_rows, q.block_cols})}};
    if (!q.activation_scheme.empty()) qj["activation_scheme"] = q.activation_scheme;
    if (!q.scale_fmt.empty()) qj["scale_fmt"] = q.scale_fmt;
    j["quantization_config"] = std::move(qj);
  }
  if (c.model_type == "deepseek_v32") {
    j["index_n_heads"] = c.index_n_heads;
    j["index_head_dim"] = c.index_head_dim;
    j["index_topk"] = c.index_topk;
  }
  // Strings that came from parse are valid UTF-8; `replace` keeps dump() from throwing on others.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace ds
