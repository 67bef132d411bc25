// MoE routing for one token row (numerics.md, "MoE gate"): scoring (sigmoid V3 / softmax V2),
// optional selection bias, group-limited top-k, and the combine weights. Pure bookkeeping over a
// score row, so it is tested on hand-made scores without a model.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "kernels/isa.h"
#include "weights/model_config.h"

namespace ds {

enum class RouterScoring { sigmoid, softmax };
// noaux_tc: group score = sum of the group's top-2 biased scores (V3).
// group_limited_greedy: group score = the group's max (V2). greedy: no groups.
enum class RouterGroupRule { noaux_tc, group_limited_greedy, greedy };

struct RouterConfig {
  int n_experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  RouterScoring scoring = RouterScoring::sigmoid;
  RouterGroupRule group_rule = RouterGroupRule::noaux_tc;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;

  // Errors (weights_bad_config) for an unknown scoring_func/topk_method or inconsistent counts.
  static Result<RouterConfig> from_model_config(const ModelConfig& c);
};

// Scratch for route_row, sized once for n_experts.
struct RouterScratch {
  std::vector<float> scores;       // [n_experts] unbiased s
  std::vector<float> biased;       // [n_experts] s + b, experts of dropped groups at -inf
  std::vector<float> group_score;  // [n_group]
  std::vector<int32_t> group_idx;  // [topk_group]
  std::vector<float> tmp;          // [n_experts / n_group]
  std::vector<int32_t> tmp_idx;    // [2]
  void size_for(const RouterConfig& cfg);
};

// logits: [n_experts] gate outputs; bias: [n_experts] or nullptr. Writes the top_k expert ids
// (descending biased score, ties to the lower id) and their combine weights.
void route_row(Isa isa, const RouterConfig& cfg, const float* logits, const float* bias, RouterScratch& s,
               int32_t* out_idx, float* out_weight);

}  // namespace ds
