#include "model/moe_dispatch.h"

#include <algorithm>
#include <cstring>

namespace ds {

void group_by_expert(const int32_t* expert, int64_t n_choices, int64_t n_experts, ExpertGroups& out) {
  out.first.assign(static_cast<size_t>(n_experts + 1), 0);
  for (int64_t c = 0; c < n_choices; ++c) ++out.first[static_cast<size_t>(expert[c]) + 1];
  for (int64_t e = 0; e < n_experts; ++e) out.first[e + 1] += out.first[e];
  out.order.resize(static_cast<size_t>(n_choices));
  std::vector<int64_t> fill(out.first.begin(), out.first.end() - 1);
  for (int64_t c = 0; c < n_choices; ++c) out.order[fill[expert[c]]++] = c;
}

void run_experts_here(const RoutedChoices& in, int64_t n_experts, const LocalExpertRunner& run_local,
                      MoeDispatchScratch& s, float* y_choice) {
  const int64_t n_choices = in.n_rows * in.top_k, d = in.hidden;
  group_by_expert(in.expert, n_choices, n_experts, s.groups);
  s.xs.resize(static_cast<size_t>(n_choices * d));
  s.ws.resize(static_cast<size_t>(n_choices));
  s.ys.resize(static_cast<size_t>(n_choices * d));
  for (int64_t r = 0; r < n_choices; ++r) {
    const int64_t c = s.groups.order[r];
    std::memcpy(s.xs.data() + r * d, in.x + (c / in.top_k) * d, static_cast<size_t>(d) * sizeof(float));
    s.ws[r] = in.weight[c];
  }
  s.jobs.clear();
  for (int64_t e = 0; e < n_experts; ++e) {
    const int64_t r0 = s.groups.first[e], m = s.groups.first[e + 1] - r0;
    if (m > 0) {
      s.jobs.push_back(ExpertRows{static_cast<int32_t>(e), s.xs.data() + r0 * d, s.ws.data() + r0, m,
                                  s.ys.data() + r0 * d});
    }
  }
  run_local(s.jobs);
  for (int64_t r = 0; r < n_choices; ++r) {
    std::memcpy(y_choice + s.groups.order[r] * d, s.ys.data() + r * d,
                static_cast<size_t>(d) * sizeof(float));
  }
}

void run_routed_experts(const ForwardContext& ctx, const RoutedChoices& in, int64_t n_experts,
                        const LocalExpertRunner& run_local, MoeDispatchScratch& s, float* y_choice) {
  if (ctx.expert_exchange != nullptr) {
    ctx.expert_exchange->run(in, run_local, y_choice);
  } else {
    run_experts_here(in, n_experts, run_local, s, y_choice);
  }
}

void combine_routed(const RoutedChoices& in, const float* y_choice, bool apply_weight, float* out) {
  const int64_t k_top = in.top_k, d = in.hidden;
  std::vector<int64_t> order(static_cast<size_t>(k_top));
  for (int64_t t = 0; t < in.n_rows; ++t) {
    const int32_t* e = in.expert + t * k_top;
    for (int64_t k = 0; k < k_top; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return e[a] < e[b]; });
    float* o = out + t * d;
    for (int64_t k : order) {
      const float* y = y_choice + (t * k_top + k) * d;
      if (apply_weight) {
        const float w = in.weight[t * k_top + k];
        for (int64_t j = 0; j < d; ++j) o[j] += w * y[j];
      } else {
        for (int64_t j = 0; j < d; ++j) o[j] += y[j];
      }
    }
  }
}

}  // namespace ds
