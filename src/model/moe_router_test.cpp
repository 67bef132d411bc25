#include "model/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ds {
namespace {

float logit_of(float s) { return std::log(s / (1.0f - s)); }  // sigmoid⁻¹

struct Routed {
  std::vector<int32_t> idx;
  std::vector<float> w;
};

Routed route(const RouterConfig& cfg, const std::vector<float>& logits, const std::vector<float>* bias) {
  RouterScratch s;
  s.size_for(cfg);
  Routed r{std::vector<int32_t>(static_cast<size_t>(cfg.top_k)),
           std::vector<float>(static_cast<size_t>(cfg.top_k))};
  route_row(Isa::reference, cfg, logits.data(), bias ? bias->data() : nullptr, s, r.idx.data(), r.w.data());
  return r;
}

RouterConfig v3_like() {
  RouterConfig c;
  c.n_experts = 8;
  c.top_k = 2;
  c.n_group = 4;  // groups {0,1} {2,3} {4,5} {6,7}
  c.topk_group = 2;
  c.scoring = RouterScoring::sigmoid;
  c.group_rule = RouterGroupRule::noaux_tc;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5f;
  return c;
}

// Expert 0 has the best single score, but its group's top-2 sum is low, so group limiting drops
// it; the bias then lifts expert 5 above 2 and 3, while the weights use the unbiased scores.
TEST(MoeRouter, V3GroupLimitedSelectionWithBias) {
  const std::vector<float> s = {0.95f, 0.01f, 0.6f, 0.6f, 0.55f, 0.58f, 0.3f, 0.2f};
  std::vector<float> logits;
  for (float v : s) logits.push_back(logit_of(v));
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0.1f, 0, 0};
  // group sums (biased): 0.96, 1.2, 1.23, 0.5 -> keep groups 2 and 1
  const Routed r = route(v3_like(), logits, &bias);
  ASSERT_EQ(r.idx, (std::vector<int32_t>{5, 2}));  // 0.68 biased, then 0.6 (tie with 3: lower id)
  const float sum = 0.58f + 0.6f;
  EXPECT_NEAR(r.w[0], 2.5f * 0.58f / sum, 1e-5f);
  EXPECT_NEAR(r.w[1], 2.5f * 0.6f / sum, 1e-5f);

  // Without groups the best single expert wins.
  RouterConfig flat = v3_like();
  flat.n_group = 1;
  flat.topk_group = 1;
  EXPECT_EQ(route(flat, logits, &bias).idx, (std::vector<int32_t>{0, 5}));
}

TEST(MoeRouter, SoftmaxGreedyWithoutNormalisation) {
  RouterConfig c;
  c.n_experts = 4;
  c.top_k = 2;
  c.scoring = RouterScoring::softmax;
  c.group_rule = RouterGroupRule::greedy;
  c.norm_topk_prob = false;
  c.routed_scaling_factor = 1.0f;
  const std::vector<float> logits = {1, 2, 3, 0};
  const Routed r = route(c, logits, nullptr);
  ASSERT_EQ(r.idx, (std::vector<int32_t>{2, 1}));
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.0);
  EXPECT_NEAR(r.w[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.w[1], std::exp(2.0) / z, 1e-6);
}

// V2's group_limited_greedy scores a group by its max, not its top-2 sum.
TEST(MoeRouter, GroupLimitedGreedyUsesGroupMax) {
  RouterConfig c;
  c.n_experts = 6;
  c.top_k = 2;
  c.n_group = 3;  // {0,1} {2,3} {4,5}
  c.topk_group = 1;
  c.scoring = RouterScoring::softmax;
  c.group_rule = RouterGroupRule::group_limited_greedy;
  c.norm_topk_prob = false;
  // group maxes: 3.0 (group 0), 2.9 (group 1; its sum 5.8 would beat group 0's 3.1), 1
  const std::vector<float> logits = {3.0f, 0.1f, 2.9f, 2.9f, 1.0f, 0.5f};
  EXPECT_EQ(route(c, logits, nullptr).idx, (std::vector<int32_t>{0, 1}));
  c.group_rule = RouterGroupRule::noaux_tc;  // same scores, top-2-sum group rule
  EXPECT_EQ(route(c, logits, nullptr).idx, (std::vector<int32_t>{2, 3}));
}

TEST(MoeRouter, TiesGoToLowerIds) {
  RouterConfig c = v3_like();
  const std::vector<float> logits(8, 0.25f);
  const Routed r = route(c, logits, nullptr);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.w[0], 1.25f, 1e-6f);
}

TEST(MoeRouter, ConfigValidation) {
  ModelConfig mc;
  mc.n_routed_experts = 8;
  mc.num_experts_per_tok = 2;
  mc.n_group = 4;
  mc.topk_group = 2;
  EXPECT_TRUE(RouterConfig::from_model_config(mc).ok());
  ModelConfig bad = mc;
  bad.scoring_func = "relu";
  EXPECT_EQ(RouterConfig::from_model_config(bad).status().code(), ErrorCode::weights_bad_config);
  bad = mc;
  bad.n_group = 3;
  EXPECT_EQ(RouterConfig::from_model_config(bad).status().code(), ErrorCode::weights_bad_config);
  bad = mc;
  bad.num_experts_per_tok = 5;  // only 2 groups × 2 experts are selectable
  EXPECT_EQ(RouterConfig::from_model_config(bad).status().code(), ErrorCode::weights_bad_config);
  bad = mc;
  bad.topk_method = "nope";
  EXPECT_EQ(RouterConfig::from_model_config(bad).status().code(), ErrorCode::weights_bad_config);
}

}  // namespace
}  // namespace ds
