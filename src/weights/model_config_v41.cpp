// deepseek_v41 (V4.1-Flash) config.json: the DeepseekV41ForCausalLM wrapper (model keys in
// `text_config`, token ids, `quantization_config` with expert_dtype and `vision_config` at the top
// level; model-spec §2.2), the keys V4.1 adds to V4's, and the writer. Nothing is fixed to the
// released values; the source lists are checked against compress_ratios by v41_layer_specs.
#include <string>

#include "weights/config_key_reader.h"
#include "weights/layer_spec.h"

namespace ds::config_detail {

namespace {

// FP8 window KV simulates 32-element blocks over every channel; compressed KV is FP4 in
// 16-blocks and index keys FP4 in 32-blocks (model-spec §3).
constexpr int kV41CacheBlock = 32;
constexpr int64_t kMaxEngramRows = int64_t{1} << 40;

// `key` absent, null or -1: none (-1 is how ports spell "no candidate source"); else >= 0.
Status get_optional_layer(const KeyReader& r, const std::string& key, int& out) {
  const Json* v = r.find(key);
  if (v != nullptr && v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() == -1) {
    out = -1;
    return ok_status();
  }
  return r.get_int(key, IntRange::non_negative, false, out);
}

Status parse_engram(const KeyReader& r, ModelConfig& c) {
  EngramConfig e;
  DS_TRY(get_int_array(r, "engram_layer_ids", false, 0, c.num_hidden_layers - 1, e.layer_ids));
  if (e.layer_ids.empty()) return ok_status();  // no Engram (absent or [])
  DS_TRY(get_int_array(r, "engram_num_embeddings", true, 1, kMaxEngramRows, e.num_embeddings));
  if (e.num_embeddings.size() != e.layer_ids.size()) {
    return r.error("engram_num_embeddings", "has " + std::to_string(e.num_embeddings.size()) +
                                                " entries for " + std::to_string(e.layer_ids.size()) +
                                                " engram_layer_ids");
  }
  for (size_t i = 1; i < e.layer_ids.size(); ++i) {
    if (e.layer_ids[i] <= e.layer_ids[i - 1]) {
      return r.error("engram_layer_ids", "element " + std::to_string(i) + " is not above the previous one");
    }
  }
  DS_TRY(r.get_int("engram_max_ngram_size", IntRange::positive, true, e.max_ngram_size));
  if (e.max_ngram_size < 2) return r.error("engram_max_ngram_size", "must be >= 2 (bigrams and up)");
  DS_TRY(r.get_int("engram_vocab_size", IntRange::positive, true, e.vocab_size));
  DS_TRY(r.get_int("engram_n_heads", IntRange::positive, true, e.n_heads));
  DS_TRY(r.get_int("engram_head_dim", IntRange::positive, true, e.head_dim));
  if (e.head_dim % kV41CacheBlock != 0) {
    return r.error("engram_head_dim", "must be a multiple of 32 (one E8M0 scale per 32 columns)");
  }
  DS_TRY(r.get_int("engram_pad_token_id", IntRange::non_negative, true, e.pad_token_id));
  if (e.pad_token_id >= c.vocab_size) return r.error("engram_pad_token_id", "must be < vocab_size");
  DS_TRY(r.get_int("engram_compressed_vocab_size", IntRange::positive, true, e.compressed_vocab_size));
  if (e.compressed_vocab_size > c.vocab_size) {
    return r.error("engram_compressed_vocab_size", "must be <= vocab_size (a map of the token ids)");
  }
  c.engram = std::move(e);
  return ok_status();
}

Status parse_v41_text_keys(const KeyReader& r, ModelConfig& c) {
  if (c.num_hash_layers != 0) return r.error("num_hash_layers", "must be 0 (V4.1 has no hash-routed layers)");
  if (c.head_dim % kV41CacheBlock != 0) {
    return r.error("head_dim", "must be a multiple of 32 (FP8/FP4 cache blocks)");
  }
  if (c.index_head_dim % kV41CacheBlock != 0) {
    return r.error("index_head_dim", "must be a multiple of 32 (FP4 index-key blocks)");
  }
  const int last = c.num_hidden_layers - 1;
  DS_TRY(get_int_array(r, "kv_source_layer_ids", false, 0, last, c.kv_source_layer_ids));
  DS_TRY(get_int_array(r, "index_source_layer_ids", false, 0, last, c.index_source_layer_ids));
  DS_TRY(get_optional_layer(r, "candidate_source_layer_id", c.candidate_source_layer_id));
  if (c.candidate_source_layer_id >= 0) {
    DS_TRY(r.get_int("candidate_topk_blocks", IntRange::positive, true, c.candidate_topk_blocks));
    DS_TRY(r.get_int("candidate_block_size", IntRange::positive, true, c.candidate_block_size));
  }
  DS_TRY(r.get_double("gate_temp", false, c.gate_temp));
  if (!(c.gate_temp > 0)) return r.error("gate_temp", "must be positive");
  DS_TRY(parse_engram(r, c));
  if (c.dspark) {
    DsparkConfig& d = *c.dspark;
    DS_TRY(r.get_int("dspark_n_routed_experts", IntRange::positive, false, d.n_routed_experts));
    DS_TRY(r.get_int("dspark_num_experts_per_tok", IntRange::positive, false, d.num_experts_per_tok));
    const int experts = d.n_routed_experts > 0 ? d.n_routed_experts : c.n_routed_experts;
    if (d.num_experts_per_tok > experts) {
      return r.error("dspark_num_experts_per_tok",
                     "must be <= the stages' experts (" + std::to_string(experts) + ")");
    }
  }
  return ok_status();
}

// Token ids of the wrapper (they win over text_config's: generation reads the wrapper's).
Status parse_wrapper_ids(const KeyReader& top, ModelConfig& c) {
  DS_TRY(top.get_int("bos_token_id", IntRange::non_negative, false, c.bos_token_id));
  DS_TRY(top.get_int("eos_token_id", IntRange::non_negative, false, c.eos_token_id));
  DS_TRY(top.get_int("pad_token_id", IntRange::non_negative, false, c.pad_token_id));
  DS_TRY(top.get_int("image_token_id", IntRange::non_negative, false, c.image_token_id));
  const std::pair<const char*, int> ids[] = {{"bos_token_id", c.bos_token_id},
                                             {"eos_token_id", c.eos_token_id},
                                             {"pad_token_id", c.pad_token_id},
                                             {"image_token_id", c.image_token_id}};
  for (const auto& [key, id] : ids) {
    if (id >= c.vocab_size) return top.error(key, "must be < text_config.vocab_size");
  }
  return ok_status();
}

}  // namespace

Result<ModelConfig> parse_deepseek_v41(const Json& root, const std::string& source) {
  KeyReader top(root, source);
  const Json* text = top.find("text_config");
  if (text == nullptr || !text->is_object()) {
    return top.error("text_config", text == nullptr ? "missing required object (DeepseekV41ForCausalLM)"
                                                    : "must be an object");
  }
  KeyReader r(*text, source, "text_config.");
  if (r.find("model_type") != nullptr) {
    std::string text_type;
    DS_TRY(r.get_choice("model_type", {"deepseek_v41_text"}, text_type));
  }
  if (const Json* v = top.find("vision_config"); v != nullptr && !v->is_object()) {
    return top.error("vision_config", "must be an object or null");
  }
  ModelConfig c;
  c.model_type = "deepseek_v41";
  c.has_vision = top.find("vision_config") != nullptr;
  DS_TRY(parse_common_keys(*text, source, "text_config.", c));
  DS_TRY(parse_wrapper_ids(top, c));
  DS_TRY(parse_quantization(root, source, c.quantization));
  if (const Json* q = top.find("quantization_config"); q != nullptr && q->is_object()) {
    // V4.1 keeps expert_dtype inside quantization_config (model-spec §2.2).
    const KeyReader qr(*q, source, "quantization_config.");
    if (qr.find("expert_dtype") != nullptr) DS_TRY(qr.get_choice("expert_dtype", {"fp4"}, c.expert_dtype));
  }
  DS_TRY(parse_deepseek_v4_keys(*text, source, "text_config.", c));
  DS_TRY(parse_v41_text_keys(r, c));
  DS_TRY(v41_layer_specs(c, source).status());
  return c;
}

Json deepseek_v41_to_json(const ModelConfig& c) {
  // The keys V4.1's text_config shares with V4-Flash's config, minus the ones it moved or dropped.
  Json text = deepseek_v4_to_json(c);
  for (const char* k :
       {"architectures", "expert_dtype", "quantization_config", "num_hash_layers", "torch_dtype",
        "dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank"}) {
    text.erase(k);
  }
  text["model_type"] = "deepseek_v41_text";
  text["kv_source_layer_ids"] = c.kv_source_layer_ids;
  text["index_source_layer_ids"] = c.index_source_layer_ids;
  if (c.candidate_source_layer_id >= 0) {
    text["candidate_source_layer_id"] = c.candidate_source_layer_id;
    text["candidate_topk_blocks"] = c.candidate_topk_blocks;
    text["candidate_block_size"] = c.candidate_block_size;
  }
  text["gate_temp"] = c.gate_temp;
  if (c.engram) {
    const EngramConfig& e = *c.engram;
    text["engram_layer_ids"] = e.layer_ids;
    text["engram_num_embeddings"] = e.num_embeddings;
    text["engram_max_ngram_size"] = e.max_ngram_size;
    text["engram_vocab_size"] = e.vocab_size;
    text["engram_n_heads"] = e.n_heads;
    text["engram_head_dim"] = e.head_dim;
    text["engram_pad_token_id"] = e.pad_token_id;
    text["engram_compressed_vocab_size"] = e.compressed_vocab_size;
  } else {
    text["engram_layer_ids"] = Json::array();
  }
  if (c.dspark) {
    const DsparkConfig& d = *c.dspark;
    text["dspark_block_size"] = d.block_size;
    text["dspark_noise_token_id"] = d.noise_token_id;
    text["dspark_target_layer_ids"] = d.target_layer_ids;
    text["dspark_markov_rank"] = d.markov_rank;
    if (d.n_routed_experts > 0) text["dspark_n_routed_experts"] = d.n_routed_experts;
    if (d.num_experts_per_tok > 0) text["dspark_num_experts_per_tok"] = d.num_experts_per_tok;
  }
  Json j = Json::object();
  j["architectures"] = Json::array({"DeepseekV41ForCausalLM"});
  j["model_type"] = c.model_type;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (c.pad_token_id >= 0) j["pad_token_id"] = c.pad_token_id;
  if (c.image_token_id >= 0) j["image_token_id"] = c.image_token_id;
  j["torch_dtype"] = "bfloat16";
  if (c.quantization.quant_method == "fp8") {
    // As released: no `fmt` key, expert_dtype inside (model-spec §2.2).
    const QuantizationConfig& q = c.quantization;
    Json qj = {{"quant_method", q.quant_method},
               {"weight_block_size", Json::array({q.block_rows, q.block_cols})}};
    if (!q.activation_scheme.empty()) qj["activation_scheme"] = q.activation_scheme;
    if (!q.scale_fmt.empty()) qj["scale_fmt"] = q.scale_fmt;
    if (!c.expert_dtype.empty()) qj["expert_dtype"] = c.expert_dtype;
    j["quantization_config"] = std::move(qj);
  }
  j["text_config"] = std::move(text);
  // make-model writes no vision weights; a checkpoint with them keeps its own vision_config.
  if (c.has_vision) j["vision_config"] = Json::object({{"model_type", "deepseek_v41_vision"}});
  return j;
}

}  // namespace ds::config_detail
