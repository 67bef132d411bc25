#include "weights/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ds {
namespace {

using Json = nlohmann::json;

// The released DeepSeek-V3 config.json (values per model-spec §8), including keys we ignore.
Json v3_config() {
  return Json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"},
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "pretraining_tp": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
    "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
    "v_head_dim": 128, "vocab_size": 129280
  })");
}

// DeepSeek-V2-Lite: q_lora_rank null (plain q_proj), softmax scoring, greedy top-k.
Json v2_lite_config() {
  return Json::parse(R"({
    "architectures": ["DeepseekV2ForCausalLM"], "bos_token_id": 100000, "eos_token_id": 100001,
    "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "model_type": "deepseek_v2", "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1,
    "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": false,
    "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
    "num_key_value_heads": 16, "q_lora_rank": null, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                     "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
    "tie_word_embeddings": false, "topk_group": 1, "topk_method": "greedy",
    "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400
  })");
}

Json v32_config() {
  Json j = v3_config();
  j["model_type"] = "deepseek_v32";
  j["architectures"] = {"DeepseekV32ForCausalLM"};
  j["index_n_heads"] = 64;
  j["index_head_dim"] = 128;
  j["index_topk"] = 2048;
  j["quantization_config"]["scale_fmt"] = "ue8m0";
  return j;
}

const char* kSource = "models/x/config.json";

Result<ModelConfig> parse(const Json& j) { return parse_model_config(j.dump(), kSource); }

void expect_config_error(const Json& j, const std::string& key, const std::string& what = "") {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << "accepted config with bad " << key;
  EXPECT_EQ(r.status().code(), ErrorCode::weights_bad_config);
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind(std::string(kSource) + ": " + key + ":", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ModelConfig, ParsesTheRealDeepSeekV3Config) {
  auto r = parse(v3_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.model_type, "deepseek_v3");
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.intermediate_size, 18432);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.num_key_value_heads, 128);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.v_head_dim, 128);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.moe_layer_freq, 1);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.scoring_func, "sigmoid");
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.max_position_embeddings, 163840);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40);
  EXPECT_DOUBLE_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale, 1);
  EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.quantization.quant_method, "fp8");
  EXPECT_EQ(c.quantization.fmt, "e4m3");
  EXPECT_EQ(c.quantization.activation_scheme, "dynamic");
  EXPECT_EQ(c.quantization.scale_fmt, "");
  EXPECT_EQ(c.quantization.block_rows, 128);
  EXPECT_EQ(c.quantization.block_cols, 128);
  EXPECT_EQ(c.index_topk, 0);
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_TRUE(c.is_moe_layer(60));
}

TEST(ModelConfig, ParsesV2LiteWithNullQLoraRank) {
  auto r = parse(v2_lite_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model_type, "deepseek_v2");
  EXPECT_EQ(r->q_lora_rank, 0);
  EXPECT_EQ(r->scoring_func, "softmax");
  EXPECT_EQ(r->topk_method, "greedy");
  EXPECT_FALSE(r->norm_topk_prob);
  EXPECT_EQ(r->n_routed_experts, 64);
  EXPECT_EQ(r->n_shared_experts, 2);
  EXPECT_EQ(r->num_experts_per_tok, 6);
  EXPECT_EQ(r->num_nextn_predict_layers, 0);
  EXPECT_DOUBLE_EQ(r->rope_scaling.mscale, 0.707);
  EXPECT_EQ(r->bos_token_id, 100000);
  EXPECT_EQ(r->eos_token_id, 100001);
  EXPECT_EQ(r->quantization.quant_method, "");
}

TEST(ModelConfig, V2DefaultsDifferFromV3WhenKeysAreAbsent) {
  Json v2 = v2_lite_config();
  v2.erase("scoring_func");
  v2.erase("topk_method");
  v2.erase("norm_topk_prob");
  auto r2 = parse(v2);
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(r2->scoring_func, "softmax");
  EXPECT_EQ(r2->topk_method, "greedy");
  EXPECT_FALSE(r2->norm_topk_prob);

  Json v3 = v3_config();
  v3.erase("scoring_func");
  v3.erase("topk_method");
  v3.erase("norm_topk_prob");
  auto r3 = parse(v3);
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  EXPECT_EQ(r3->scoring_func, "sigmoid");
  EXPECT_EQ(r3->topk_method, "noaux_tc");
  EXPECT_TRUE(r3->norm_topk_prob);
}

TEST(ModelConfig, ParsesV32IndexerKeys) {
  auto r = parse(v32_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model_type, "deepseek_v32");
  EXPECT_EQ(r->index_n_heads, 64);
  EXPECT_EQ(r->index_head_dim, 128);
  EXPECT_EQ(r->index_topk, 2048);
  EXPECT_EQ(r->quantization.scale_fmt, "ue8m0");
  for (const char* key : {"index_n_heads", "index_head_dim", "index_topk"}) {
    Json j = v32_config();
    j.erase(key);
    SCOPED_TRACE(key);
    expect_config_error(j, key, "missing required key");
  }
}

TEST(ModelConfig, EachMissingRequiredKeyIsNamed) {
  for (const char* key : {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                          "qk_rope_head_dim", "v_head_dim", "max_position_embeddings", "rms_norm_eps",
                          "moe_intermediate_size", "num_experts_per_tok", "n_shared_experts"}) {
    Json j = v3_config();
    j.erase(key);
    SCOPED_TRACE(key);
    expect_config_error(j, key, "missing required key");
  }
}

Json dense_config();

TEST(ModelConfig, DenseModelNeedsNoMoeKeys) {
  auto r = parse(dense_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->n_routed_experts, 0);
  EXPECT_FALSE(r->is_moe_layer(10));
}

TEST(ModelConfig, UnknownKeysAreIgnored) {
  Json j = v3_config();
  j["some_future_key"] = {{"nested", {1, 2, 3}}};
  j["another"] = "x";
  auto with_extra = parse(j);
  auto plain = parse(v3_config());
  ASSERT_TRUE(with_extra.ok()) << with_extra.status().to_string();
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(*with_extra == *plain);
}

TEST(ModelConfig, WrongTypesAndRangesAreRejectedWithTheKey) {
  struct Case {
    const char* key;
    Json value;
    const char* what;
  };
  const Case cases[] = {
      {"num_attention_heads", 0, "must be a positive integer"},
      {"num_attention_heads", -4, "must be a positive integer"},
      {"num_attention_heads", "128", "must be a positive integer"},
      {"num_attention_heads", 1.5, "must be a positive integer"},
      {"hidden_size", 4294967296LL, "below 2^31"},
      {"vocab_size", 18446744073709551615ULL, "below 2^31"},
      {"qk_rope_head_dim", 63, "must be even"},
      {"num_experts_per_tok", 300, "must be <= n_routed_experts"},
      {"num_experts_per_tok", 200, "must be <= topk_group * n_routed_experts / n_group"},
      {"n_group", 7, "must divide n_routed_experts"},
      {"topk_group", 9, "must be <= n_group"},
      {"first_k_dense_replace", 62, "must be <= num_hidden_layers"},
      {"rms_norm_eps", 0, "must be positive"},
      {"rms_norm_eps", -1e-6, "must be positive"},
      {"rms_norm_eps", "1e-6", "must be a number"},
      {"rope_theta", 0, "must be positive"},
      {"norm_topk_prob", 1, "must be true or false"},
      {"scoring_func", "tanh", "not supported"},
      {"topk_method", "best", "not supported"},
      {"hidden_act", "gelu", "not supported"},
      {"model_type", "llama", "not supported"},
      {"bos_token_id", 129280, "must be < vocab_size"},
      {"q_lora_rank", -1, "must be a non-negative integer"},
      {"rope_scaling", 5, "must be an object or null"},
      {"quantization_config", "fp8", "must be an object or null"},
  };
  for (const Case& c : cases) {
    Json j = v3_config();
    j[c.key] = c.value;
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    expect_config_error(j, c.key, c.what);
  }
}

TEST(ModelConfig, NestedObjectsAreValidated) {
  struct Case {
    const char* object;
    const char* key;
    Json value;  // null means: erase the key
    const char* what;
  };
  const Case cases[] = {
      {"rope_scaling", "type", "linear", "not supported"},
      {"rope_scaling", "type", nullptr, "missing required key"},
      {"rope_scaling", "factor", 0.5, "must be >= 1"},
      {"rope_scaling", "factor", nullptr, "missing required key"},
      {"rope_scaling", "original_max_position_embeddings", 0, "must be positive"},
      {"rope_scaling", "beta_slow", 0, "must be positive"},
      {"rope_scaling", "beta_fast", 0.5, "must be >= beta_slow"},
      {"rope_scaling", "mscale", -1, "must be non-negative"},
      {"quantization_config", "quant_method", "int4", "not supported"},
      {"quantization_config", "quant_method", nullptr, "missing required key"},
      {"quantization_config", "fmt", "e5m2", "not supported"},
      {"quantization_config", "weight_block_size", Json::array({128}), "positive integers"},
      {"quantization_config", "weight_block_size", Json::array({128, 0}), "positive integers"},
      {"quantization_config", "weight_block_size", Json::array({128, "128"}), "positive integers"},
  };
  for (const Case& c : cases) {
    Json j = v3_config();
    if (c.value.is_null()) {
      j[c.object].erase(c.key);
    } else {
      j[c.object][c.key] = c.value;
    }
    SCOPED_TRACE(std::string(c.object) + "." + c.key + " = " + c.value.dump());
    expect_config_error(j, std::string(c.object) + "." + c.key, c.what);
  }
}

TEST(ModelConfig, OptionalObjectsMayBeAbsentOrNull) {
  Json j = v3_config();
  j["rope_scaling"] = nullptr;
  j.erase("quantization_config");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope_scaling.type, "");
  EXPECT_EQ(r->quantization.quant_method, "");

  Json rt = v3_config();
  rt["rope_scaling"].erase("type");
  rt["rope_scaling"]["rope_type"] = "yarn";  // newer HF spelling
  auto r2 = parse(rt);
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(r2->rope_scaling.type, "yarn");
}

TEST(ModelConfig, RejectsTextThatIsNotAJsonObject) {
  for (const char* text : {"", "{", "[1,2]", "null", "{\"model_type\": }"}) {
    auto r = parse_model_config(text, kSource);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::weights_bad_config);
    EXPECT_EQ(r.status().message().rfind(kSource, 0), 0u);
  }
}

Json dense_config() {
  Json j = v3_config();
  for (const char* key :
       {"n_routed_experts", "moe_intermediate_size", "num_experts_per_tok", "n_shared_experts"}) {
    j.erase(key);
  }
  return j;
}

TEST(ModelConfig, RoundTripsThroughJson) {
  for (const Json& j : {v3_config(), v2_lite_config(), v32_config(), dense_config()}) {
    auto first = parse(j);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    const std::string text = model_config_to_json(*first);
    auto second = parse_model_config(text, kSource);
    ASSERT_TRUE(second.ok()) << second.status().to_string() << "\n" << text;
    EXPECT_TRUE(*first == *second) << text;
    EXPECT_EQ(model_config_to_json(*second), text);
  }
}

TEST(ModelConfig, ToJsonWritesHuggingFaceConventions) {
  auto v2 = parse(v2_lite_config());
  ASSERT_TRUE(v2.ok());
  const Json j2 = Json::parse(model_config_to_json(*v2));
  EXPECT_TRUE(j2["q_lora_rank"].is_null());
  EXPECT_FALSE(j2.contains("quantization_config"));
  EXPECT_EQ(j2["torch_dtype"], "bfloat16");

  auto v3 = parse(v3_config());
  ASSERT_TRUE(v3.ok());
  const Json j3 = Json::parse(model_config_to_json(*v3));
  EXPECT_EQ(j3["architectures"], Json::array({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(j3["q_lora_rank"], 1536);
  EXPECT_EQ(j3["quantization_config"]["weight_block_size"], Json::array({128, 128}));
  EXPECT_EQ(j3["quantization_config"]["quant_method"], "fp8");
}

TEST(ModelConfig, LoadReadsDirConfigAndNamesThePath) {
  const auto dir = std::filesystem::temp_directory_path() / "ds_model_config_test";
  std::filesystem::create_directories(dir);
  {
    Json j = v3_config();
    j["hidden_size"] = -1;
    std::ofstream(dir / "config.json") << j.dump();
  }
  auto bad = load_model_config(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            (dir / "config.json").string() + ": hidden_size: must be a positive integer");
  std::ofstream(dir / "config.json") << v3_config().dump();
  auto good = load_model_config(dir.string());
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(good->hidden_size, 7168);
  std::filesystem::remove_all(dir);

  auto missing = load_model_config(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace ds
