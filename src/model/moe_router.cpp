#include "model/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/softmax.h"
#include "kernels/topk.h"

namespace ds {

namespace {
Status bad_router(const std::string& what) {
  return Status(ErrorCode::weights_bad_config, "config.json: " + what);
}
}  // namespace

Result<RouterConfig> RouterConfig::from_model_config(const ModelConfig& c) {
  RouterConfig r;
  r.n_experts = c.n_routed_experts;
  r.top_k = c.num_experts_per_tok;
  r.n_group = std::max(1, c.n_group);
  r.topk_group = std::max(1, c.topk_group);
  r.norm_topk_prob = c.norm_topk_prob;
  r.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  if (c.scoring_func == "sigmoid") {
    r.scoring = RouterScoring::sigmoid;
  } else if (c.scoring_func == "softmax") {
    r.scoring = RouterScoring::softmax;
  } else {
    return bad_router("scoring_func '" + c.scoring_func + "' is not sigmoid or softmax");
  }
  if (c.topk_method == "noaux_tc") {
    r.group_rule = RouterGroupRule::noaux_tc;
  } else if (c.topk_method == "group_limited_greedy") {
    r.group_rule = RouterGroupRule::group_limited_greedy;
  } else if (c.topk_method == "greedy") {
    r.group_rule = RouterGroupRule::greedy;
  } else {
    return bad_router("topk_method '" + c.topk_method + "' is not noaux_tc, group_limited_greedy or greedy");
  }
  if (r.n_experts <= 0) return bad_router("n_routed_experts must be > 0 for a MoE layer");
  if (r.n_experts % r.n_group != 0) {
    return bad_router("n_routed_experts " + std::to_string(r.n_experts) + " is not a multiple of n_group " +
                      std::to_string(r.n_group));
  }
  if (r.topk_group > r.n_group) {
    return bad_router("topk_group " + std::to_string(r.topk_group) + " > n_group " +
                      std::to_string(r.n_group));
  }
  const int selectable =
      r.group_rule == RouterGroupRule::greedy ? r.n_experts : r.topk_group * (r.n_experts / r.n_group);
  if (r.top_k <= 0 || r.top_k > selectable) {
    return bad_router("num_experts_per_tok " + std::to_string(r.top_k) + " must be in [1, " +
                      std::to_string(selectable) + "]");
  }
  return r;
}

void RouterScratch::size_for(const RouterConfig& cfg) {
  scores.resize(static_cast<size_t>(cfg.n_experts));
  biased.resize(static_cast<size_t>(cfg.n_experts));
  group_score.resize(static_cast<size_t>(cfg.n_group));
  group_idx.resize(static_cast<size_t>(cfg.topk_group));
  tmp.resize(static_cast<size_t>(cfg.n_experts / cfg.n_group));
  tmp_idx.resize(2);
}

void route_row(Isa isa, const RouterConfig& cfg, const float* logits, const float* bias, RouterScratch& s,
               int32_t* out_idx, float* out_weight) {
  const int E = cfg.n_experts;
  float* scores = s.scores.data();
  float* biased = s.biased.data();
  if (cfg.scoring == RouterScoring::sigmoid) {
    for (int e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    std::copy(logits, logits + E, scores);
    softmax(isa, scores, E);
  }
  for (int e = 0; e < E; ++e) biased[e] = bias ? scores[e] + bias[e] : scores[e];

  if (cfg.group_rule != RouterGroupRule::greedy && cfg.n_group > 1) {
    const int group_size = E / cfg.n_group;
    for (int g = 0; g < cfg.n_group; ++g) {
      const float* grp = biased + g * group_size;
      float score;
      if (cfg.group_rule == RouterGroupRule::noaux_tc) {
        // Sum of the group's top-2 biased scores.
        const int k = std::min(2, group_size);
        topk(isa, grp, group_size, k, s.tmp_idx.data(), s.tmp.data());
        score = 0.0f;
        for (int i = 0; i < k; ++i) score += s.tmp[static_cast<size_t>(i)];
      } else {
        score = *std::max_element(grp, grp + group_size);
      }
      s.group_score[static_cast<size_t>(g)] = score;
    }
    topk(isa, s.group_score.data(), cfg.n_group, cfg.topk_group, s.group_idx.data(), nullptr);
    // Experts of groups not kept cannot be chosen.
    for (int g = 0; g < cfg.n_group; ++g) {
      const bool kept = std::find(s.group_idx.begin(), s.group_idx.end(), g) != s.group_idx.end();
      if (kept) continue;
      std::fill(biased + g * group_size, biased + (g + 1) * group_size,
                -std::numeric_limits<float>::infinity());
    }
  }
  topk(isa, biased, E, cfg.top_k, out_idx, nullptr);

  // Combine weights come from the unbiased scores (the bias only steers selection).
  float sum = 0.0f;
  for (int i = 0; i < cfg.top_k; ++i) {
    out_weight[i] = scores[out_idx[i]];
    sum += out_weight[i];
  }
  const bool normalise = cfg.norm_topk_prob && sum > 0.0f;
  for (int i = 0; i < cfg.top_k; ++i) {
    const float w = normalise ? out_weight[i] / sum : out_weight[i];
    out_weight[i] = w * cfg.routed_scaling_factor;
  }
}

}  // namespace ds
