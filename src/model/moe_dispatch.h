// The one MoE dispatch -> expert compute -> combine path of V3 (moe.cpp) and V4 (v4_moe.cpp).
// Routed choices are grouped per expert (counting sort, ascending choice index within an expert),
// each expert runs once over all its rows (its weights are read once per forward, whatever the
// batch), and combine adds each row's outputs in ascending expert id. It lives in model/, not
// kernels/: it is bookkeeping over routing plus the seam expert parallelism plugs into
// (expert_exchange.h); the expert math itself stays with each model's expert type.
#pragma once

#include <cstdint>
#include <vector>

#include "model/expert_exchange.h"
#include "model/forward_context.h"

namespace ds {

// choices grouped by expert: expert e's choices are order[first[e] .. first[e+1]).
struct ExpertGroups {
  std::vector<int64_t> first;  // [n_experts + 1]
  std::vector<int64_t> order;  // [n_choices] choice indices
};

// Stable counting sort of expert ids [n_choices] in [0, n_experts).
void group_by_expert(const int32_t* expert, int64_t n_choices, int64_t n_experts, ExpertGroups& out);

struct MoeDispatchScratch {
  ExpertGroups groups;
  std::vector<float> xs;  // [n_choices, hidden] inputs in group order
  std::vector<float> ws;  // [n_choices] weights in group order
  std::vector<float> ys;  // [n_choices, hidden] outputs in group order
  std::vector<ExpertRows> jobs;
};

// Runs every choice's expert in this process: y_choice [n_rows · top_k, hidden].
void run_experts_here(const RoutedChoices& in, int64_t n_experts, const LocalExpertRunner& run_local,
                      MoeDispatchScratch& s, float* y_choice);

// Through ctx.expert_exchange when set (expert parallelism), else run_experts_here.
void run_routed_experts(const ForwardContext& ctx, const RoutedChoices& in, int64_t n_experts,
                        const LocalExpertRunner& run_local, MoeDispatchScratch& s, float* y_choice);

// out[t] += Σ over row t's choices in ascending expert id of (apply_weight ? w · y : y).
void combine_routed(const RoutedChoices& in, const float* y_choice, bool apply_weight, float* out);

}  // namespace ds
