// deepseek_v4 config.json: the released V4-Flash and V4-Flash-0731 configs, every check naming
// the file and the key, and the writer's round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "weights/model_config.h"

namespace ds {
namespace {

using Json = nlohmann::json;

const char* kSource = "models/v4/config.json";

std::vector<int> released_ratios(int n_draft) {
  std::vector<int> r = {0, 0};
  for (int i = 0; i < 20; ++i) {
    r.push_back(4);
    r.push_back(128);
  }
  r.push_back(4);
  for (int i = 0; i < n_draft; ++i) r.push_back(0);
  return r;
}

// The base DeepSeek-V4-Flash config.json (model-spec §2.1): every key of the release.
Json v4_flash_config() {
  Json j = Json::parse(R"({
    "architectures": ["DeepseekV4ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-06, "hc_mult": 4,
    "hc_sinkhorn_iters": 20, "head_dim": 512, "hidden_act": "silu", "hidden_size": 4096,
    "index_head_dim": 128, "index_n_heads": 64, "index_topk": 512, "initializer_range": 0.02,
    "max_position_embeddings": 1048576, "model_type": "deepseek_v4", "moe_intermediate_size": 2048,
    "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 64,
    "num_experts_per_tok": 6, "num_hash_layers": 3, "num_hidden_layers": 43, "num_key_value_heads": 1,
    "num_nextn_predict_layers": 1, "o_groups": 8, "o_lora_rank": 1024, "q_lora_rank": 1024,
    "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                     "original_max_position_embeddings": 65536, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus",
    "sliding_window": 128, "swiglu_limit": 10.0, "tie_word_embeddings": false,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.57.1",
    "use_cache": true, "vocab_size": 129280, "compress_rope_theta": 160000
  })");
  j["compress_ratios"] = released_ratios(1);
  return j;
}

// V4-Flash-0731: three DSpark stages after the 43 layers, num_nextn_predict_layers still 1.
Json v4_flash_0731_config() {
  Json j = v4_flash_config();
  j["compress_ratios"] = released_ratios(3);
  j["dspark_block_size"] = 5;
  j["dspark_noise_token_id"] = 128799;
  j["dspark_target_layer_ids"] = {40, 41, 42};
  j["dspark_markov_rank"] = 256;
  return j;
}

Result<ModelConfig> parse(const Json& j) { return parse_model_config(j.dump(), kSource); }

void expect_config_error(const Json& j, const std::string& key, const std::string& what = "") {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << "accepted config with bad " << key;
  EXPECT_EQ(r.status().code(), ErrorCode::weights_bad_config);
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind(std::string(kSource) + ": " + key + ":", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

TEST(ModelConfigV4, ParsesTheReleasedV4FlashConfig) {
  auto r = parse(v4_flash_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_TRUE(c.is_v4());
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 43);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.compress_ratios, released_ratios(1));
  EXPECT_EQ(c.compress_rope_theta, 160000);
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_EQ(c.rope_scaling.factor, 16);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_EQ(c.hc_eps, 1e-6);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.scoring_func, "sqrtsoftplus");
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.num_hash_layers, 3);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.expert_dtype, "fp4");
  EXPECT_EQ(c.quantization.quant_method, "fp8");
  EXPECT_EQ(c.quantization.fmt, "e4m3");
  EXPECT_EQ(c.quantization.scale_fmt, "ue8m0");
  EXPECT_EQ(c.quantization.block_rows, 128);
  EXPECT_EQ(c.quantization.block_cols, 128);
  EXPECT_FALSE(c.dspark.has_value());
  // V3-only keys are absent and stay zero.
  EXPECT_EQ(c.intermediate_size, 0);
  EXPECT_EQ(c.kv_lora_rank, 0);

  // The layer schedule of model-spec §2.1.
  EXPECT_EQ(c.num_draft_layers(), 1);
  EXPECT_EQ(c.attention_kind(0), AttentionKind::sliding_window);
  EXPECT_EQ(c.attention_kind(1), AttentionKind::sliding_window);
  for (int layer = 2; layer <= 42; layer += 2)
    EXPECT_EQ(c.attention_kind(layer), AttentionKind::csa) << layer;
  for (int layer = 3; layer <= 41; layer += 2)
    EXPECT_EQ(c.attention_kind(layer), AttentionKind::hca) << layer;
  EXPECT_EQ(c.attention_kind(43), AttentionKind::sliding_window);  // the MTP layer
  EXPECT_TRUE(c.is_hash_layer(2));
  EXPECT_FALSE(c.is_hash_layer(3));
  EXPECT_FALSE(c.is_hash_layer(43));
  EXPECT_EQ(c.kv_block_size_multiple(), 128);
  EXPECT_TRUE(c.is_moe_layer(0));
}

TEST(ModelConfigV4, Parses0731WithDsparkStagesCountedFromTheTargetLayers) {
  auto r = parse(v4_flash_0731_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->dspark.has_value());
  EXPECT_EQ(r->dspark->target_layer_ids, (std::vector<int>{40, 41, 42}));
  EXPECT_EQ(r->dspark->block_size, 5);
  EXPECT_EQ(r->dspark->noise_token_id, 128799);
  EXPECT_EQ(r->dspark->markov_rank, 256);
  EXPECT_EQ(r->num_nextn_predict_layers, 1);
  EXPECT_EQ(r->num_draft_layers(), 3);
  EXPECT_EQ(r->compress_ratios.size(), 46u);
  // Without the DSpark keys the 46 entries no longer match 43 + num_nextn_predict_layers.
  Json j = v4_flash_0731_config();
  j.erase("dspark_target_layer_ids");
  expect_config_error(j, "compress_ratios",
                      "has 46 entries, expected num_hidden_layers (43) + num_nextn_predict_layers (1) = 44");
}

TEST(ModelConfigV4, EachMissingRequiredKeyIsNamed) {
  for (const char* key :
       {"head_dim", "o_lora_rank", "o_groups", "sliding_window", "compress_ratios", "hc_mult",
        "hc_sinkhorn_iters", "hc_eps", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok",
        "qk_rope_head_dim", "q_lora_rank"}) {
    Json j = v4_flash_config();
    j.erase(key);
    SCOPED_TRACE(key);
    expect_config_error(j, key, "missing required key");
  }
  // Compression needs its RoPE base, CSA needs the indexer keys.
  for (const char* key : {"compress_rope_theta", "index_n_heads", "index_head_dim", "index_topk"}) {
    Json j = v4_flash_config();
    j.erase(key);
    SCOPED_TRACE(key);
    expect_config_error(j, key, "missing required key");
  }
  // A window-only model needs neither.
  Json j = v4_flash_config();
  for (const char* key : {"compress_rope_theta", "index_n_heads", "index_head_dim", "index_topk"})
    j.erase(key);
  j["compress_ratios"] = std::vector<int>(44, 0);
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->kv_block_size_multiple(), 1);
}

TEST(ModelConfigV4, RangeAndConsistencyErrorsNameTheKey) {
  struct Case {
    const char* key;
    Json value;
    const char* what;
  };
  const std::vector<Case> cases = {
      {"sliding_window", 0, "must be a positive integer"},
      {"head_dim", -512, "must be a positive integer"},
      {"num_key_value_heads", 64, "must be 1"},
      {"q_lora_rank", nullptr, "must be a positive integer for deepseek_v4"},
      {"qk_rope_head_dim", 512, "must be < head_dim (512)"},
      {"o_groups", 7, "must divide num_attention_heads (64)"},
      {"compress_ratios", Json::array({0, 4}), "has 2 entries, expected num_hidden_layers (43)"},
      {"compress_ratios", "4", "must be an array of integers"},
      {"num_hash_layers", 44, "must be <= num_hidden_layers (43)"},
      {"hc_eps", -1e-6, "must be non-negative"},
      {"hc_sinkhorn_iters", 0, "must be a positive integer"},
      {"swiglu_limit", -1.0, "must be non-negative"},
      {"expert_dtype", "fp8", "'fp8' is not supported (expected one of: fp4)"},
      {"moe_intermediate_size", 2040, "must be a multiple of 32 with expert_dtype fp4"},
      {"hidden_size", 4080, "must be a multiple of 32 with expert_dtype fp4"},
      {"index_head_dim", 96, "must be a power of two"},
      {"index_head_dim", 32, "must be >= qk_rope_head_dim (64)"},
      {"compress_rope_theta", 0, "must be positive"},
      {"scoring_func", "relu", "is not supported"},
  };
  for (const Case& k : cases) {
    Json j = v4_flash_config();
    j[k.key] = k.value;
    SCOPED_TRACE(std::string(k.key) + " = " + k.value.dump());
    expect_config_error(j, k.key, k.what);
  }
  Json j = v4_flash_config();
  j["compress_ratios"][5] = -4;
  expect_config_error(j, "compress_ratios", "element 5 is -4, must be in [0, 65536]");
  j["compress_ratios"][5] = 2.5;
  expect_config_error(j, "compress_ratios", "element 5 must be an integer");
  // Coprime ratios whose lcm would make an absurd KV block.
  j = v4_flash_config();
  for (int i = 0; i < 44; ++i) j["compress_ratios"][i] = 0;
  j["compress_ratios"][2] = 4;
  j["compress_ratios"][3] = 65521;
  expect_config_error(j, "compress_ratios", "least common multiple");
  j = v4_flash_0731_config();
  j["dspark_noise_token_id"] = 129280;
  expect_config_error(j, "dspark_noise_token_id", "must be < vocab_size");
  j = v4_flash_0731_config();
  j["dspark_target_layer_ids"] = {40, 41, 43};
  expect_config_error(j, "dspark_target_layer_ids", "element 2 is 43, must be in [0, 42]");
  // Without FP4 experts the 32-group constraint does not apply.
  j = v4_flash_config();
  j["expert_dtype"] = nullptr;
  j["moe_intermediate_size"] = 2040;
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->expert_dtype, "");
}

TEST(ModelConfigV4, KvBlockSizeMultipleIsTheLcmOfNonzeroRatios) {
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.compress_ratios = {0, 4, 6, 0, 4};
  EXPECT_EQ(c.kv_block_size_multiple(), 12);
  c.compress_ratios = {0, 0};
  EXPECT_EQ(c.kv_block_size_multiple(), 1);
  c.compress_ratios = {16, 4, 128};
  EXPECT_EQ(c.kv_block_size_multiple(), 128);
  EXPECT_EQ(c.attention_kind(0), AttentionKind::hca);  // 16: compressed, but only ratio 4 is CSA
  EXPECT_EQ(c.attention_kind(1), AttentionKind::csa);
}

TEST(ModelConfigV4, RoundTripsThroughJsonWithTheReleasedKeyNames) {
  for (const Json& src : {v4_flash_config(), v4_flash_0731_config()}) {
    auto a = parse(src);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    const std::string text = model_config_to_json(*a);
    auto b = parse_model_config(text, kSource);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(*a, *b);
    // Exactly the release's keys (transformers_version aside), none of V3's.
    const Json written = Json::parse(text);
    for (const auto& [key, value] : src.items()) {
      if (key != "transformers_version") {
        EXPECT_TRUE(written.contains(key)) << key;
      }
    }
    for (const auto& [key, value] : written.items()) EXPECT_TRUE(src.contains(key)) << key;
    EXPECT_EQ(written["rope_scaling"].size(), 5u) << written["rope_scaling"].dump();  // no mscale keys
  }
}

}  // namespace
}  // namespace ds
