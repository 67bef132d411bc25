// V4 roofline accounting: each tensor in one bucket, packed FP4 experts at 4.25 bits per weight
// (their scales inside that figure), the draft layers left out, and the sparse-attention FLOPs
// against a hand count.
#include "active_weights_v4.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

ModelConfig v4_config() {
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.vocab_size = 100;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.head_dim = 8;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.sliding_window = 4;
  c.compress_ratios = {4, 8, 0};  // layer 0 CSA, layer 1 HCA, mtp.0 window only
  c.index_topk = 2;
  c.index_n_heads = 3;
  c.index_head_dim = 5;
  c.expert_dtype = "fp4";
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

std::vector<TensorInfo> v4_tensors() {
  std::vector<TensorInfo> v = {
      t("embed.weight", DType::bf16, {100, 64}),                             // one row: 128 B
      t("layers.0.attn.wq_a.weight", DType::f8_e4m3, {32, 64}),              // 2048 B
      t("layers.0.attn.wq_a.scale", DType::f8_e8m0, {1, 1}),                 // 1 B
      t("layers.0.attn.compressor.ape", DType::f32, {4, 16}),                // 256 B, no params
      t("layers.0.attn.indexer.weights_proj.weight", DType::bf16, {3, 64}),  // 384 B
      t("layers.0.ffn.gate.tid2eid", DType::i64, {100, 2}),                  // one row: 16 B
      t("layers.0.ffn.gate.weight", DType::bf16, {8, 64}),                   // 1024 B
      t("layers.0.ffn.shared_experts.w1.weight", DType::f8_e4m3, {32, 64}),  // 2048 B
      t("layers.0.ffn.shared_experts.w1.scale", DType::f8_e8m0, {1, 1}),     // 1 B
      t("layers.0.hc_attn_fn", DType::f32, {24, 256}),                       // 24576 B
      t("layers.0.attn_norm.weight", DType::bf16, {64}),                     // 128 B
      t("layers.1.attn.wkv.weight", DType::bf16, {8, 64}),                   // 1024 B
      t("mtp.0.e_proj.weight", DType::f8_e4m3, {64, 64}),                    // draft: excluded
      t("mtp.0.ffn.experts.0.w1.weight", DType::i8, {32, 32}),               // draft: excluded
      t("norm.weight", DType::bf16, {64}),                                   // 128 B
      t("hc_head_fn", DType::f32, {4, 256}),                                 // 4096 B
      t("head.weight", DType::bf16, {100, 64}),                              // 12800 B
  };
  for (int e = 0; e < 8; ++e) {
    // Packed FP4 [out 32, in 64 / 2] + E8M0 scales per 32 along K: 2048 weights each.
    v.push_back(t("layers.1.ffn.experts." + std::to_string(e) + ".w1.weight", DType::i8, {32, 32}));
    v.push_back(t("layers.1.ffn.experts." + std::to_string(e) + ".w1.scale", DType::f8_e8m0, {32, 2}));
  }
  return v;
}

TEST(ActiveWeightsV4, ClassifiesEachTensorOnce) {
  const ActiveWeights a = count_active_weights_v4(v4_tensors(), v4_config());
  EXPECT_DOUBLE_EQ(a.attention_bytes, 2048 + 1 + 256 + 384 + 1024);
  EXPECT_DOUBLE_EQ(a.dense_bytes, 16 + 1024 + 2048 + 1);
  // 2 of 8 experts, 2048 weights each at 4.25 bits = 1088 B (scales included, not added again).
  EXPECT_DOUBLE_EQ(a.routed_bytes, 2 * 2048 * 4.25 / 8);
  EXPECT_DOUBLE_EQ(a.head_bytes, 12800);
  EXPECT_DOUBLE_EQ(a.other_bytes, 128 + 24576 + 128 + 128 + 4096);
  EXPECT_EQ(a.n_mtp_tensors_excluded, 2);
  EXPECT_EQ(a.n_unclassified, 0);
  // Matmul weights: wq_a 2048, weights_proj 192, gate 512, shared w1 2048, hc_attn_fn 6144,
  // wkv 512, hc_head_fn 1024; routed 8 x 2048 x 2/8. Not ape, tid2eid, scales, norms, embedding.
  EXPECT_DOUBLE_EQ(a.body_params, 2048 + 192 + 512 + 2048 + 6144 + 512 + 1024 + 8 * 2048 * 2.0 / 8);
  EXPECT_DOUBLE_EQ(a.head_params, 100 * 64);
}

TEST(ActiveWeightsV4, Fp8ExpertsCountAsStored) {
  ModelConfig cfg = v4_config();
  cfg.expert_dtype.clear();
  const std::vector<TensorInfo> v = {t("layers.1.ffn.experts.3.w1.weight", DType::f8_e4m3, {32, 64}),
                                     t("layers.1.ffn.experts.3.w1.scale", DType::f8_e8m0, {1, 1})};
  EXPECT_DOUBLE_EQ(count_active_weights_v4(v, cfg).routed_bytes, (2048 + 1) * 2.0 / 8);
}

TEST(ActiveWeightsV4, EngramTablesCountTheGatheredRowsOnly) {
  ModelConfig cfg = v4_config();
  EngramConfig e;
  e.layer_ids = {1};
  e.max_ngram_size = 4;
  e.n_heads = 2;  // 6 rows a token
  e.head_dim = 32;
  cfg.engram = e;
  const std::vector<TensorInfo> v = {t("layers.1.engram.embed.weight", DType::f8_e4m3, {600, 32}),
                                     t("layers.1.engram.embed.scale", DType::f8_e8m0, {600, 1}),
                                     t("layers.1.engram.wkv.weight", DType::f8_e4m3, {320, 192})};
  const ActiveWeights a = count_active_weights_v4(v, cfg);
  EXPECT_DOUBLE_EQ(a.other_bytes, 6 * 32 + 6 * 1);  // 6 of 600 rows, with their scales
  EXPECT_DOUBLE_EQ(a.dense_bytes, 320 * 192);
  EXPECT_DOUBLE_EQ(a.body_params, 320 * 192);
  EXPECT_EQ(a.n_unclassified, 0);
}

TEST(ActiveWeightsV4, AttentionFlopsMatchHandCount) {
  const ModelConfig cfg = v4_config();
  // Prompt of 8, window 4. Per key 4 · 2 heads · 8 = 64 FLOPs.
  // Layer 0 (CSA, r 4): window keys 1,2,3,4,4,4,4,4 = 26; n_c = 0,0,0,1,1,1,1,2 = 6, top-2 keeps
  //   all 6; indexer 2 · 3 · 5 = 30 FLOPs per scored entry, 6 entries.
  // Layer 1 (HCA, r 8): window 26; n_c = 1 at p = 7 only.
  const double layer0 = 64.0 * (26 + 6) + 30.0 * 6;
  const double layer1 = 64.0 * (26 + 1);
  EXPECT_DOUBLE_EQ(v4_attention_flops_per_token(cfg, 8), (layer0 + layer1) / 8);
  EXPECT_DOUBLE_EQ(v4_attention_flops_per_token(cfg, 0), 0);
}

TEST(ActiveWeightsV4, CacheBytesCountWindowAndCompressedRows) {
  const ModelConfig cfg = v4_config();
  // ctx 20: layer 0 window 4 x 8 + top-2 of 5 entries x 8 + 5 indexer keys x 5; layer 1 window
  // 4 x 8 + 2 entries x 8. f32.
  EXPECT_DOUBLE_EQ(v4_cache_bytes(cfg, 20), 4.0 * (32 + 16 + 25 + 32 + 16));
}

}  // namespace
}  // namespace ds::bench
