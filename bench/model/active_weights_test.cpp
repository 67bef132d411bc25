// The roofline accounting must put each checkpoint tensor in the right bucket: a misfiled
// routed expert or a counted MTP layer would move the model bench's "% of roofline" by tens of %.
#include "active_weights.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 100;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;  // layer 2 is the MTP layer
  c.num_attention_heads = 4;
  c.kv_lora_rank = 32;
  c.qk_rope_head_dim = 16;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  return c;
}

TensorInfo t(std::string name, DType dtype, Shape shape) {
  TensorInfo ti;
  ti.name = std::move(name);
  ti.dtype = dtype;
  ti.shape = shape;
  ti.nbytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype));
  return ti;
}

std::vector<TensorInfo> tiny_tensors() {
  std::vector<TensorInfo> v = {
      t("model.embed_tokens.weight", DType::bf16, {100, 64}),                   // 12800 B
      t("model.layers.0.self_attn.q_a_proj.weight", DType::f8_e4m3, {48, 64}),  // 3072 B
      t("model.layers.0.self_attn.q_a_proj.weight_scale_inv", DType::f32, {1, 1}),
      t("model.layers.0.input_layernorm.weight", DType::bf16, {64}),                   // 128 B
      t("model.layers.0.mlp.gate_proj.weight", DType::bf16, {128, 64}),                // 16384 B
      t("model.layers.1.mlp.shared_experts.down_proj.weight", DType::bf16, {64, 32}),  // 4096 B
      t("model.layers.1.mlp.gate.weight", DType::f32, {8, 64}),                        // 2048 B
      t("model.layers.2.eh_proj.weight", DType::bf16, {64, 128}),                      // MTP
      t("model.layers.2.self_attn.kv_a_proj_with_mqa.weight", DType::bf16, {48, 64}),  // MTP
      t("model.norm.weight", DType::bf16, {64}),                                       // 128 B
      t("lm_head.weight", DType::bf16, {100, 64}),                                     // 12800 B
      t("something.else", DType::f32, {10}),                                           // 40 B
  };
  for (int e = 0; e < 8; ++e) {
    v.push_back(
        t("model.layers.1.mlp.experts." + std::to_string(e) + ".up_proj.weight", DType::bf16, {32, 64}));
  }
  return v;
}

TEST(ActiveWeights, ClassifiesEachTensorOnce) {
  const ActiveWeights a = count_active_weights(tiny_tensors(), tiny_config());
  EXPECT_DOUBLE_EQ(a.attention_bytes, 3072 + 4);
  EXPECT_DOUBLE_EQ(a.dense_bytes, 16384 + 4096 + 2048);
  // 8 experts x 4096 B, 2 of 8 active per token.
  EXPECT_DOUBLE_EQ(a.routed_bytes, 8 * 4096 * 2.0 / 8);
  EXPECT_DOUBLE_EQ(a.head_bytes, 12800);
  // one embedding row (128 B) + layernorm 128 + final norm 128 + the unclassified 40.
  EXPECT_DOUBLE_EQ(a.other_bytes, 128 + 128 + 128 + 40);
  EXPECT_EQ(a.n_mtp_tensors_excluded, 2);
  EXPECT_EQ(a.n_unclassified, 1);
  // Parameters: scales and 1-D tensors are not matmul parameters; the embedding is a lookup.
  EXPECT_DOUBLE_EQ(a.body_params, 48 * 64 + 128 * 64 + 64 * 32 + 8 * 64 + 8 * (32 * 64) * 2.0 / 8);
  EXPECT_DOUBLE_EQ(a.head_params, 100 * 64);
  EXPECT_DOUBLE_EQ(a.total_bytes(),
                   a.attention_bytes + a.dense_bytes + a.routed_bytes + a.head_bytes + a.other_bytes);
}

TEST(ActiveWeights, TiedEmbeddingIsTheHead) {
  ModelConfig cfg = tiny_config();
  cfg.tie_word_embeddings = true;
  std::vector<TensorInfo> v;
  for (const TensorInfo& ti : tiny_tensors()) {
    if (ti.name != "lm_head.weight") v.push_back(ti);
  }
  const ActiveWeights a = count_active_weights(v, cfg);
  EXPECT_DOUBLE_EQ(a.head_bytes, 12800);
  EXPECT_DOUBLE_EQ(a.head_params, 100 * 64);
}

TEST(ActiveWeights, AttentionFlopsMatchABruteForceSumOverPositions) {
  const ModelConfig cfg = tiny_config();
  for (int64_t len : {1, 2, 7, 512}) {
    double total = 0;
    for (int64_t p = 0; p < len; ++p) {
      const double rows = static_cast<double>(p + 1);
      total += cfg.num_hidden_layers * cfg.num_attention_heads * rows *
               (2.0 * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + 2.0 * cfg.kv_lora_rank);
    }
    EXPECT_DOUBLE_EQ(mla_attention_flops_per_token(cfg, len), total / static_cast<double>(len))
        << "len=" << len;
  }
  EXPECT_EQ(mla_attention_flops_per_token(cfg, 0), 0.0);
}

TEST(ActiveWeights, LatentCacheBytesPerStep) {
  const ModelConfig cfg = tiny_config();
  EXPECT_DOUBLE_EQ(latent_cache_bytes(cfg, 10), 2.0 * 10 * (32 + 16) * 4);
}

}  // namespace
}  // namespace ds::bench
