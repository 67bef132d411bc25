// deepseek_v41 config.json: the released V4.1-Flash wrapper (model-spec §2.2), its layer roles
// and KV budget (§5.3, §5.11), one error line naming the key for every inconsistency, and the
// writer's round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {
namespace {

using Json = nlohmann::json;

const char* kSource = "models/v41/config.json";

// [0,0] + [2]×18 + [1]×20 + [0,0,0]: 40 layers + 3 DSpark stages.
std::vector<int> released_ratios() {
  std::vector<int> r = {0, 0};
  for (int i = 0; i < 18; ++i) r.push_back(2);
  for (int i = 0; i < 20; ++i) r.push_back(1);
  for (int i = 0; i < 3; ++i) r.push_back(0);
  return r;
}

// Every key of the released DeepSeek-V4.1-Flash config.json (vision_config abridged).
Json v41_flash_config() {
  Json j = Json::parse(R"({
    "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
    "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "image_token_id": 129264,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                            "weight_block_size": [32, 32], "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
    "vision_config": {"model_type": "deepseek_v41_vision", "num_hidden_layers": 32, "hidden_size": 1024,
                      "num_attention_heads": 16, "intermediate_size": 2816, "patch_size": 14},
    "text_config": {
      "model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120,
      "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
      "qk_rope_head_dim": 64, "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8,
      "moe_intermediate_size": 2304, "n_routed_experts": 384, "n_shared_experts": 1,
      "num_experts_per_tok": 6, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc",
      "norm_topk_prob": true, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
      "rms_norm_eps": 1e-20, "hidden_act": "silu", "rope_theta": 10000, "compress_rope_theta": 160000,
      "rope_scaling": {"type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                       "original_max_position_embeddings": 65536},
      "max_position_embeddings": 1048576, "sliding_window": 128,
      "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
      "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
      "candidate_source_layer_id": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
      "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
      "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682],
      "engram_max_ngram_size": 4, "engram_vocab_size": 16000000, "engram_n_heads": 8,
      "engram_head_dim": 256, "engram_pad_token_id": 2, "engram_compressed_vocab_size": 99092,
      "num_nextn_predict_layers": 3, "dspark_block_size": 5, "dspark_noise_token_id": 128799,
      "dspark_target_layer_ids": [37, 38, 39], "dspark_markov_rank": 256,
      "dspark_n_routed_experts": 128, "dspark_num_experts_per_tok": 3,
      "tie_word_embeddings": false, "gate_temp": 1.0
    }
  })");
  j["text_config"]["compress_ratios"] = released_ratios();
  return j;
}

Result<ModelConfig> parse(const Json& j) { return parse_model_config(j.dump(), kSource); }

// One line: "<file>: <key>: ..." containing `what`.
void expect_config_error(const Json& j, const std::string& key, const std::string& what = "") {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << "accepted config with bad " << key;
  EXPECT_EQ(r.status().code(), ErrorCode::weights_bad_config);
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind(std::string(kSource) + ": " + key + ":", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ModelConfigV41, ParsesTheReleasedConfig) {
  auto r = parse(v41_flash_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_TRUE(c.is_v41());
  EXPECT_FALSE(c.is_v4());
  EXPECT_TRUE(c.is_v4_family());
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.num_draft_layers(), 3);
  EXPECT_EQ(c.rms_norm_eps, 1e-20);  // honoured exactly, not clamped
  EXPECT_EQ(c.quantization.quant_method, "fp8");
  EXPECT_EQ(c.quantization.block_rows, 32);
  EXPECT_EQ(c.quantization.block_cols, 32);
  EXPECT_EQ(c.quantization.scale_fmt, "ue8m0");
  EXPECT_EQ(c.expert_dtype, "fp4");  // from inside quantization_config
  EXPECT_EQ(c.pad_token_id, 2);
  EXPECT_EQ(c.image_token_id, 129264);
  EXPECT_TRUE(c.has_vision);
  EXPECT_EQ(c.num_hash_layers, 0);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int>{2, 8, 14, 20}));
  EXPECT_EQ(c.index_source_layer_ids, (std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c.candidate_source_layer_id, 20);
  EXPECT_EQ(c.candidate_topk_blocks, 2048);
  EXPECT_EQ(c.candidate_block_size, 8);
  EXPECT_EQ(c.gate_temp, 1.0);
  ASSERT_TRUE(c.engram.has_value());
  EXPECT_EQ(c.engram->num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(c.engram->compressed_vocab_size, 99092);
  EXPECT_EQ(c.engram->pad_token_id, 2);
  ASSERT_TRUE(c.dspark.has_value());
  EXPECT_EQ(c.dspark->target_layer_ids, (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(c.dspark->n_routed_experts, 128);
  EXPECT_EQ(c.dspark->num_experts_per_tok, 3);
  for (int l = 0; l < 43; ++l) {
    EXPECT_EQ(c.attention_kind(l),
              c.compress_ratio(l) == 0 ? AttentionKind::sliding_window : AttentionKind::csa);
  }
}

TEST(ModelConfigV41, LayerRolesOfTheRelease) {
  auto c = parse(v41_flash_config());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto s = v41_layer_specs(*c);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->size(), 43u);
  const std::vector<LayerSpec>& L = *s;
  for (int l : {0, 1, 40, 41, 42}) {
    EXPECT_EQ(L[l].attention, AttentionKind::sliding_window) << l;
    EXPECT_EQ(L[l].kv_source_layer, -1) << l;
  }
  EXPECT_TRUE(L[1].engram);
  EXPECT_TRUE(L[14].engram);
  EXPECT_FALSE(L[2].engram);
  // model-spec §5.3's table, row by row.
  auto expect = [&](int l, int kv, int ix) {
    EXPECT_EQ(L[l].kv_source_layer, kv) << l;
    EXPECT_EQ(L[l].index_source_layer, ix) << l;
    EXPECT_EQ(L[l].index_keys_layer, kv) << l;
    EXPECT_FALSE(L[l].overlap) << l;
    EXPECT_EQ(L[l].compressed_kv, CacheQuant::fp4_16_e4m3) << l;
    EXPECT_EQ(L[l].window_kv, CacheQuant::fp8_32_pow2) << l;
  };
  for (int l = 2; l < 8; ++l) expect(l, 2, 2);
  for (int l = 8; l < 14; ++l) expect(l, 8, 8);
  for (int l = 14; l < 20; ++l) expect(l, 14, 14);
  for (int l = 20; l < 24; ++l) expect(l, 20, 20);
  for (int l = 24; l < 40; ++l) expect(l, 20, 24 + (l - 24) / 4 * 4);
  EXPECT_TRUE(L[20].candidate_source);
  for (int l = 0; l < 43; ++l) {
    const bool pool = l == 24 || l == 28 || l == 32 || l == 36;
    EXPECT_EQ(L[l].candidate_pool, pool) << l;
  }
  // §5.11: 3 × 288/2 + 288 + 3 × 68/2 + 68 = 890 bytes of paged cache per token.
  EXPECT_DOUBLE_EQ(paged_cache_bytes_per_token(*c, L), 890.0);
  // Plus 43 rings of 128 FP8 rows of 512 channels with one scale byte per 32.
  EXPECT_EQ(window_ring_bytes_per_sequence(*c, L), 43 * 128 * (512 + 16));
}

TEST(ModelConfigV41, InconsistentSourceListsNameTheKey) {
  auto with = [](const char* key, Json v) {
    Json j = v41_flash_config();
    j["text_config"][key] = std::move(v);
    return j;
  };
  // Layer 3 reads ratio 2 but its latest source (0 is window-only) ... no source before layer 2.
  expect_config_error(with("kv_source_layer_ids", {8, 14, 20}), "text_config.kv_source_layer_ids",
                      "layer 2 (compress_ratios[2] = 2) has no source");
  // Layer 21 would read a ratio-2 source.
  expect_config_error(with("kv_source_layer_ids", {2, 8, 14}), "text_config.kv_source_layer_ids",
                      "reads source 14 of ratio 2");
  expect_config_error(with("kv_source_layer_ids", {2, 8, 8, 20}), "text_config.kv_source_layer_ids",
                      "not above the previous");
  expect_config_error(with("kv_source_layer_ids", {1, 2, 8, 14, 20}), "text_config.kv_source_layer_ids",
                      "compress_ratios[1] = 0");
  expect_config_error(with("kv_source_layer_ids", {2, 8, 14, 40}), "text_config.kv_source_layer_ids",
                      "must be in [0, 39]");
  // Layer 20 would reuse 14's top-k, entry ids of another cache.
  expect_config_error(with("index_source_layer_ids", {2, 8, 14, 24}), "text_config.index_source_layer_ids",
                      "reuses the top-k of index source 14");
  expect_config_error(with("index_source_layer_ids", Json::array()), "text_config.index_source_layer_ids",
                      "no index source");
  expect_config_error(with("candidate_source_layer_id", 24), "text_config.candidate_source_layer_id",
                      "kv_source_layer_ids");
  Json ratios = v41_flash_config();
  ratios["text_config"]["compress_ratios"][41] = 2;
  expect_config_error(ratios, "text_config.compress_ratios", "window-only");
  Json short_ratios = v41_flash_config();
  short_ratios["text_config"]["compress_ratios"].erase(42);
  expect_config_error(short_ratios, "text_config.compress_ratios", "expected num_hidden_layers (40)");
}

TEST(ModelConfigV41, OtherChecksNameTheKey) {
  auto text_with = [](const char* key, Json v) {
    Json j = v41_flash_config();
    j["text_config"][key] = std::move(v);
    return j;
  };
  expect_config_error(text_with("gate_temp", 0), "text_config.gate_temp", "positive");
  expect_config_error(text_with("num_hash_layers", 3), "text_config.num_hash_layers", "no hash");
  expect_config_error(text_with("model_type", "deepseek_v4"), "text_config.model_type", "deepseek_v41_text");
  expect_config_error(text_with("engram_num_embeddings", {384006168}), "text_config.engram_num_embeddings",
                      "1 entries for 2");
  expect_config_error(text_with("engram_compressed_vocab_size", 200000),
                      "text_config.engram_compressed_vocab_size", "vocab_size");
  expect_config_error(text_with("engram_layer_ids", {1, 40}), "text_config.engram_layer_ids", "[0, 39]");
  expect_config_error(text_with("dspark_num_experts_per_tok", 200), "text_config.dspark_num_experts_per_tok");
  expect_config_error(text_with("head_dim", 500), "text_config.head_dim");
  expect_config_error(text_with("rms_norm_eps", 0), "text_config.rms_norm_eps", "positive");
  Json no_candidate_size = v41_flash_config();
  no_candidate_size["text_config"].erase("candidate_block_size");
  expect_config_error(no_candidate_size, "text_config.candidate_block_size", "missing");
  Json no_text = v41_flash_config();
  no_text.erase("text_config");
  expect_config_error(no_text, "text_config", "missing");
  Json bad_image = v41_flash_config();
  bad_image["image_token_id"] = 129280;
  expect_config_error(bad_image, "image_token_id", "vocab_size");
  Json bad_quant = v41_flash_config();
  bad_quant["quantization_config"]["expert_dtype"] = "fp8";
  expect_config_error(bad_quant, "quantization_config.expert_dtype", "fp4");
}

TEST(ModelConfigV41, OptionalPartsMayBeAbsent) {
  Json j = v41_flash_config();
  Json& t = j["text_config"];
  for (const char* k :
       {"engram_layer_ids", "engram_num_embeddings", "candidate_source_layer_id", "gate_temp"}) {
    t.erase(k);
  }
  j.erase("vision_config");
  j.erase("quantization_config");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->engram.has_value());
  EXPECT_EQ(r->candidate_source_layer_id, -1);
  EXPECT_EQ(r->gate_temp, 1.0);
  EXPECT_FALSE(r->has_vision);
  EXPECT_TRUE(r->expert_dtype.empty());
  auto s = v41_layer_specs(*r);
  ASSERT_TRUE(s.ok());
  for (const LayerSpec& x : *s) EXPECT_FALSE(x.candidate_pool || x.candidate_source || x.engram);
  t["candidate_source_layer_id"] = -1;  // how ports spell "none"
  EXPECT_TRUE(parse(j).ok());
}

TEST(ModelConfigV41, WriterRoundTrips) {
  auto c = parse(v41_flash_config());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::string text = model_config_to_json(*c);
  const Json j = Json::parse(text);
  EXPECT_EQ(j["architectures"][0], "DeepseekV41ForCausalLM");
  EXPECT_EQ(j["text_config"]["model_type"], "deepseek_v41_text");
  EXPECT_EQ(j["quantization_config"]["expert_dtype"], "fp4");
  EXPECT_FALSE(j["quantization_config"].contains("fmt"));
  EXPECT_FALSE(j["text_config"].contains("num_hash_layers"));
  auto back = parse_model_config(text, kSource);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *c);
}

}  // namespace
}  // namespace ds
