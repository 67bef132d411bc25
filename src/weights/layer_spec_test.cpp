#include "weights/layer_spec.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

ModelConfig v4_config(std::vector<int> ratios, int n_layers) {
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.num_hidden_layers = n_layers;
  c.compress_ratios = std::move(ratios);
  return c;
}

TEST(LayerSpec, V4RolesFromCompressRatios) {
  // V4-Flash's schedule shape: SWA, SWA, CSA, HCA, CSA + one SWA MTP layer.
  Result<std::vector<LayerSpec>> s = v4_layer_specs(v4_config({0, 0, 4, 16, 4, 0}, 5));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 6u);
  for (int l : {0, 1, 5}) {
    const LayerSpec& x = (*s)[l];
    EXPECT_EQ(x.attention, AttentionKind::sliding_window) << l;
    EXPECT_EQ(x.kv_source_layer, -1) << l;
    EXPECT_EQ(x.index_source_layer, -1) << l;
    EXPECT_EQ(x.compressed_kv, CacheQuant::none) << l;
    EXPECT_EQ(x.window_kv, CacheQuant::fp8_64_pow2_nope) << l;
  }
  const LayerSpec& csa = (*s)[2];
  EXPECT_EQ(csa.attention, AttentionKind::csa);
  EXPECT_TRUE(csa.overlap);
  EXPECT_TRUE(csa.owns_compressor());
  EXPECT_TRUE(csa.owns_indexer());
  EXPECT_EQ(csa.index_keys, CacheQuant::fp4_32_pow2);
  const LayerSpec& hca = (*s)[3];
  EXPECT_EQ(hca.attention, AttentionKind::hca);
  EXPECT_EQ(hca.compress_ratio, 16);
  EXPECT_FALSE(hca.overlap);
  EXPECT_TRUE(hca.owns_compressor());
  EXPECT_EQ(hca.index_source_layer, -1);
  EXPECT_EQ(hca.compressed_kv, CacheQuant::fp8_64_pow2_nope);
  EXPECT_EQ(hca.index_keys, CacheQuant::none);
  EXPECT_FALSE(hca.engram);
}

TEST(LayerSpec, BadRatiosNameTheKey) {
  Result<std::vector<LayerSpec>> neg = v4_layer_specs(v4_config({0, -4, 0}, 2));
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), ErrorCode::weights_bad_config);
  EXPECT_NE(neg.status().message().find("compress_ratios[1]"), std::string::npos);
}

}  // namespace
}  // namespace ds
