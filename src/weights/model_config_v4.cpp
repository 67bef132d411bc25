// deepseek_v4 (V4-Flash) config.json keys: parsing, range and consistency checks, and the writer.
// Key names are the released config's (model-spec §2.1); nothing is fixed to the released values.
#include <algorithm>
#include <numeric>
#include <string>

#include "weights/config_key_reader.h"

namespace ds::config_detail {

namespace {

// Bounds that keep derived sizes far from int overflow; the released model is far below them.
constexpr int kMaxCompressRatio = 1 << 16;
constexpr int64_t kMaxKvBlockMultiple = 1 << 16;
// FP4 experts carry one E8M0 scale per 32 consecutive inputs (MXFP4), so their input widths
// (hidden_size for w1/w3, moe_intermediate_size for w2) must be whole groups.
constexpr int kFp4GroupSize = 32;

bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

Status parse_dspark(const KeyReader& r, ModelConfig& c) {
  if (r.find("dspark_target_layer_ids") == nullptr) return ok_status();
  DsparkConfig d;
  DS_TRY(get_int_array(r, "dspark_target_layer_ids", true, 0, c.num_hidden_layers - 1, d.target_layer_ids));
  if (d.target_layer_ids.empty()) return r.error("dspark_target_layer_ids", "must not be empty");
  DS_TRY(r.get_int("dspark_block_size", IntRange::positive, false, d.block_size));
  DS_TRY(r.get_int("dspark_noise_token_id", IntRange::non_negative, false, d.noise_token_id));
  if (d.noise_token_id >= c.vocab_size) return r.error("dspark_noise_token_id", "must be < vocab_size");
  DS_TRY(r.get_int("dspark_markov_rank", IntRange::positive, false, d.markov_rank));
  c.dspark = std::move(d);
  return ok_status();
}

Status check_attention(const KeyReader& r, const ModelConfig& c) {
  if (c.num_key_value_heads != 1) {
    return r.error("num_key_value_heads", "must be 1 (V4 attention shares one K=V latent across heads)");
  }
  if (c.q_lora_rank == 0) return r.error("q_lora_rank", "must be a positive integer for deepseek_v4");
  if (c.qk_rope_head_dim >= c.head_dim) {
    return r.error("qk_rope_head_dim", "must be < head_dim (" + std::to_string(c.head_dim) + ")");
  }
  if (c.num_attention_heads % c.o_groups != 0) {
    return r.error("o_groups",
                   "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  }
  return ok_status();
}

Status check_compression(const KeyReader& r, const ModelConfig& c) {
  // Main layers, then one entry per draft layer: the DSpark stages when the config has them
  // (V4-Flash-0731: 43 + 3 with num_nextn_predict_layers 1), else the MTP layers.
  const int n_draft =
      c.dspark ? static_cast<int>(c.dspark->target_layer_ids.size()) : c.num_nextn_predict_layers;
  const size_t want = static_cast<size_t>(c.num_hidden_layers) + static_cast<size_t>(n_draft);
  if (c.compress_ratios.size() != want) {
    const std::string draft = c.dspark ? "len(dspark_target_layer_ids) (" : "num_nextn_predict_layers (";
    return r.error("compress_ratios", "has " + std::to_string(c.compress_ratios.size()) +
                                          " entries, expected num_hidden_layers (" +
                                          std::to_string(c.num_hidden_layers) + ") + " + draft +
                                          std::to_string(n_draft) + ") = " + std::to_string(want));
  }
  const bool any_compressed =
      std::any_of(c.compress_ratios.begin(), c.compress_ratios.end(), [](int x) { return x > 0; });
  // V4.1: every compressed layer selects top-k through an indexer (CSA2), whatever its ratio.
  const bool any_csa = c.is_v41() ? any_compressed
                                  : std::find(c.compress_ratios.begin(), c.compress_ratios.end(),
                                              kCsaCompressRatio) != c.compress_ratios.end();
  int64_t multiple = 1;
  for (int ratio : c.compress_ratios) {
    if (ratio > 0) multiple = std::lcm(multiple, int64_t{ratio});
    if (multiple > kMaxKvBlockMultiple) {
      return r.error("compress_ratios", "the least common multiple of the nonzero ratios exceeds " +
                                            std::to_string(kMaxKvBlockMultiple));
    }
  }
  if (any_compressed && !(c.compress_rope_theta > 0)) {
    return r.error("compress_rope_theta",
                   c.compress_rope_theta == 0 && r.find("compress_rope_theta") == nullptr
                       ? "missing required key (a compress ratio is > 0)"
                       : "must be positive");
  }
  if (any_csa) {
    // The CSA indexer rotates the last qk_rope_head_dim channels of each index head and applies
    // a Hadamard transform over the whole head.
    if (c.index_n_heads == 0 || c.index_head_dim == 0 || c.index_topk == 0) {
      const char* key = c.index_n_heads == 0    ? "index_n_heads"
                        : c.index_head_dim == 0 ? "index_head_dim"
                                                : "index_topk";
      return r.error(key, c.is_v41()
                              ? "missing required key (a layer has a compress ratio > 0)"
                              : "missing required key (a layer has compress ratio 4: CSA with an indexer)");
    }
    if (!c.is_v41() && !is_power_of_two(c.index_head_dim)) {
      return r.error("index_head_dim", "must be a power of two (Hadamard transform)");
    }
    if (c.index_head_dim < c.qk_rope_head_dim) {
      return r.error("index_head_dim",
                     "must be >= qk_rope_head_dim (" + std::to_string(c.qk_rope_head_dim) + ")");
    }
  }
  return ok_status();
}

Status check_moe_v4(const KeyReader& r, const ModelConfig& c) {
  if (c.num_hash_layers > c.num_hidden_layers) {
    return r.error("num_hash_layers",
                   "must be <= num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ")");
  }
  if (c.expert_dtype == "fp4") {
    if (c.hidden_size % kFp4GroupSize != 0) {
      return r.error("hidden_size",
                     "must be a multiple of 32 with expert_dtype fp4 (one scale per 32 inputs)");
    }
    if (c.moe_intermediate_size % kFp4GroupSize != 0) {
      return r.error("moe_intermediate_size",
                     "must be a multiple of 32 with expert_dtype fp4 (one scale per 32 inputs)");
    }
  }
  return ok_status();
}

}  // namespace

Status parse_deepseek_v4_keys(const Json& obj, const std::string& source, const std::string& prefix,
                              ModelConfig& c) {
  KeyReader r(obj, source, prefix);
  DS_TRY(r.get_int("head_dim", IntRange::positive, true, c.head_dim));
  DS_TRY(r.get_int("o_lora_rank", IntRange::positive, true, c.o_lora_rank));
  DS_TRY(r.get_int("o_groups", IntRange::positive, true, c.o_groups));
  DS_TRY(r.get_int("sliding_window", IntRange::positive, true, c.sliding_window));
  DS_TRY(check_attention(r, c));

  DS_TRY(parse_dspark(r, c));
  DS_TRY(get_int_array(r, "compress_ratios", true, 0, kMaxCompressRatio, c.compress_ratios));
  DS_TRY(r.get_double("compress_rope_theta", false, c.compress_rope_theta));
  if (c.compress_rope_theta < 0) return r.error("compress_rope_theta", "must be positive");
  DS_TRY(r.get_int("index_n_heads", IntRange::positive, false, c.index_n_heads));
  DS_TRY(r.get_int("index_head_dim", IntRange::positive, false, c.index_head_dim));
  DS_TRY(r.get_int("index_topk", IntRange::positive, false, c.index_topk));
  DS_TRY(check_compression(r, c));

  DS_TRY(r.get_int("hc_mult", IntRange::positive, true, c.hc_mult));
  DS_TRY(r.get_int("hc_sinkhorn_iters", IntRange::positive, true, c.hc_sinkhorn_iters));
  DS_TRY(r.get_double("hc_eps", true, c.hc_eps));
  if (c.hc_eps < 0) return r.error("hc_eps", "must be non-negative");

  DS_TRY(r.get_int("num_hash_layers", IntRange::non_negative, false, c.num_hash_layers));
  DS_TRY(r.get_double("swiglu_limit", false, c.swiglu_limit));
  if (c.swiglu_limit < 0) return r.error("swiglu_limit", "must be non-negative (0 = no clamp)");
  // Absent or null: routed experts are stored like every other Linear weight (V4-Flash-Base).
  if (r.find("expert_dtype") != nullptr) DS_TRY(r.get_choice("expert_dtype", {"fp4"}, c.expert_dtype));
  return check_moe_v4(r, c);
}

Json deepseek_v4_to_json(const ModelConfig& c) {
  Json j = Json::object();
  j["architectures"] = Json::array({"DeepseekV4ForCausalLM"});
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["expert_dtype"] = c.expert_dtype.empty() ? Json(nullptr) : Json(c.expert_dtype);
  j["hc_eps"] = c.hc_eps;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = c.hidden_act;
  j["hidden_size"] = c.hidden_size;
  auto positive_or_null = [](int v) { return v == 0 ? Json(nullptr) : Json(v); };
  j["index_head_dim"] = positive_or_null(c.index_head_dim);
  j["index_n_heads"] = positive_or_null(c.index_n_heads);
  j["index_topk"] = positive_or_null(c.index_topk);
  j["initializer_range"] = 0.02;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["model_type"] = c.model_type;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_hash_layers"] = c.num_hash_layers;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["q_lora_rank"] = c.q_lora_rank;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  if (c.quantization.quant_method == "fp8") {
    const QuantizationConfig& q = c.quantization;
    Json qj = {{"quant_method", q.quant_method},
               {"fmt", q.fmt},
               {"weight_block_size", Json::array({q.block_rows, q.block_cols})}};
    if (!q.activation_scheme.empty()) qj["activation_scheme"] = q.activation_scheme;
    if (!q.scale_fmt.empty()) qj["scale_fmt"] = q.scale_fmt;
    j["quantization_config"] = std::move(qj);
  }
  j["rms_norm_eps"] = c.rms_norm_eps;
  if (c.rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    // The released V4 config has no mscale keys (V4 applies no YaRN attention factor).
    const RopeScaling& rs = c.rope_scaling;
    j["rope_scaling"] = {{"beta_fast", rs.beta_fast},
                         {"beta_slow", rs.beta_slow},
                         {"factor", rs.factor},
                         {"original_max_position_embeddings", rs.original_max_position_embeddings},
                         {"type", rs.type}};
  }
  j["rope_theta"] = c.rope_theta;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["scoring_func"] = c.scoring_func;
  j["sliding_window"] = c.sliding_window;
  j["swiglu_limit"] = c.swiglu_limit;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["topk_method"] = c.topk_method;
  j["torch_dtype"] = "bfloat16";
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["compress_ratios"] = c.compress_ratios;
  if (c.dspark) {
    j["dspark_block_size"] = c.dspark->block_size;
    j["dspark_noise_token_id"] = c.dspark->noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark->target_layer_ids;
    j["dspark_markov_rank"] = c.dspark->markov_rank;
  }
  return j;
}

}  // namespace ds::config_detail
