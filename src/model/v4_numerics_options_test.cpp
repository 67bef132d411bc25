#include "model/v4_numerics_options.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(V4NumericsOptions, DefaultsAndNamedModes) {
  for (const char* text : {"", "production"}) {
    Result<V4Numerics> n = parse_v4_numerics(text);
    ASSERT_TRUE(n.ok()) << text;
    EXPECT_EQ(n->bf16_points, kAllBf16Points);
    EXPECT_TRUE(n->kv_fp8_sim);
    EXPECT_TRUE(n->shared_expert_clamp);
  }
  Result<V4Numerics> n = parse_v4_numerics("no-bf16");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->bf16_points, 0u);
  EXPECT_TRUE(n->kv_fp8_sim);
}

TEST(V4NumericsOptions, KeysApplyLeftToRight) {
  Result<V4Numerics> n =
      parse_v4_numerics("shared_expert_clamp=off,kv_fp8_sim=off,bf16_points=-attn_probs+expert_h");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_FALSE(n->shared_expert_clamp);
  EXPECT_FALSE(n->kv_fp8_sim);
  EXPECT_FALSE(n->rounds(Bf16Point::attn_probs));
  EXPECT_FALSE(n->rounds(Bf16Point::expert_h));
  EXPECT_TRUE(n->rounds(Bf16Point::sub_norm));
  Result<V4Numerics> only = parse_v4_numerics("bf16_points=q_norm+mhc_expand");
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->bf16_points, bf16_point_bit(Bf16Point::q_norm) | bf16_point_bit(Bf16Point::mhc_expand));
  Result<V4Numerics> later = parse_v4_numerics("no-bf16,bf16=on,production,kv_fp8_sim=off");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->bf16_points, kAllBf16Points);
  EXPECT_FALSE(later->kv_fp8_sim);
}

TEST(V4NumericsOptions, FormatRoundTrips) {
  for (const char* text : {"production", "no-bf16", "bf16_points=q_norm+index_w,shared_expert_clamp=off",
                           "kv_fp8_sim=off,bf16_points=-mtp_h0"}) {
    Result<V4Numerics> n = parse_v4_numerics(text);
    ASSERT_TRUE(n.ok()) << text;
    Result<V4Numerics> back = parse_v4_numerics(format_v4_numerics(*n));
    ASSERT_TRUE(back.ok()) << format_v4_numerics(*n);
    EXPECT_EQ(back->bf16_points, n->bf16_points) << text;
    EXPECT_EQ(back->kv_fp8_sim, n->kv_fp8_sim) << text;
    EXPECT_EQ(back->shared_expert_clamp, n->shared_expert_clamp) << text;
  }
}

TEST(V4NumericsOptions, QHeadNormIsTriState) {
  EXPECT_EQ(parse_v4_numerics("")->q_head_norm, -1);  // the model's: V4 on, V4.1 off
  EXPECT_EQ(parse_v4_numerics("q_head_norm=on")->q_head_norm, 1);
  EXPECT_EQ(parse_v4_numerics("q_head_norm=off")->q_head_norm, 0);
  EXPECT_EQ(parse_v4_numerics("q_head_norm=on,q_head_norm=model")->q_head_norm, -1);
  for (const char* text : {"q_head_norm=on", "q_head_norm=off", "production"}) {
    const V4Numerics n = *parse_v4_numerics(text);
    EXPECT_EQ(parse_v4_numerics(format_v4_numerics(n))->q_head_norm, n.q_head_norm) << text;
  }
  EXPECT_FALSE(parse_v4_numerics("q_head_norm=maybe").ok());
}

TEST(V4NumericsOptions, IndexKeyPublishing) {
  EXPECT_FALSE(parse_v4_numerics("")->index_keys_on_group);  // every step: decode equals prefill
  EXPECT_TRUE(parse_v4_numerics("index_keys=on_group")->index_keys_on_group);
  EXPECT_FALSE(parse_v4_numerics("index_keys=on_group,index_keys=every_step")->index_keys_on_group);
  const V4Numerics n = *parse_v4_numerics("no-bf16,index_keys=on_group");
  EXPECT_TRUE(parse_v4_numerics(format_v4_numerics(n))->index_keys_on_group);
  EXPECT_FALSE(parse_v4_numerics("index_keys=sometimes").ok());
}

TEST(V4NumericsOptions, BadItemsNameThemselves) {
  for (const char* text : {"fast", "bf16=maybe", "bf16_points=q_norm+nope", "clamp=on", "kv_fp8_sim", ","}) {
    Result<V4Numerics> n = parse_v4_numerics(text);
    ASSERT_FALSE(n.ok()) << text;
    EXPECT_EQ(n.status().code(), ErrorCode::invalid_argument) << text;
    EXPECT_NE(n.status().message().find("--numerics"), std::string::npos) << n.status().message();
  }
  EXPECT_NE(parse_v4_numerics("bf16_points=nope").status().message().find("sub_norm"), std::string::npos);
}

}  // namespace
}  // namespace ds
