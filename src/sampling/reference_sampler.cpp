#include "sampling/reference_sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <vector>

#include "sampling/logits_processors.h"
#include "sampling/philox.h"
#include "sampling/sampling_rule.h"

namespace ds {

namespace {

// Log-softmax of a whole row in double (NaN -> -inf, +inf -> FLT_MAX), as an independent check on
// the fast path's float-exp / double-sum version.
std::vector<double> log_softmax_double(std::span<const float> row) {
  std::vector<double> v(row.size());
  double m = -INFINITY;
  for (size_t i = 0; i < row.size(); ++i) {
    v[i] = std::isnan(row[i]) ? -INFINITY : std::min<double>(row[i], FLT_MAX);
    m = std::max(m, v[i]);
  }
  double total = 0.0;
  for (const double x : v) total += std::exp(x - m);
  const double lse = m + std::log(total);
  for (double& x : v) x -= lse;
  return v;
}

void fill_from_log_softmax(std::span<const float> row, int n_top, SampleResult& result) {
  const std::vector<double> lp = log_softmax_double(row);
  result.logprob = static_cast<float>(lp[static_cast<size_t>(result.token_id)]);
  std::vector<int32_t> order;
  for (size_t i = 0; i < row.size(); ++i) {
    if (!std::isnan(row[i])) order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)];
  });
  result.n_top = std::min<int32_t>(n_top, static_cast<int32_t>(order.size()));
  for (int i = 0; i < result.n_top; ++i) {
    const int32_t id = order[static_cast<size_t>(i)];
    result.top[static_cast<size_t>(i)] = {id, static_cast<float>(lp[static_cast<size_t>(id)])};
  }
}

}  // namespace

SampleResult reference_sample(std::span<const float> logits, const SamplingParams& params,
                              const PenaltyState& penalties, uint64_t position, uint32_t draft_slot) {
  std::vector<float> x(logits.begin(), logits.end());
  apply_bias_and_penalties(x, params, penalties);
  SampleResult result;
  const bool raw_logprobs = params.logprobs_mode == LogprobsMode::raw;
  if (params.temperature == 0.0f) {
    result.token_id = argmax(x);
    if (params.logprobs)
      fill_from_log_softmax(raw_logprobs ? logits : std::span<const float>(x), params.top_logprobs, result);
    return result;
  }

  std::vector<float> z(x.size());
  for (size_t i = 0; i < x.size(); ++i) z[i] = sampling_rule::scaled_logit(x[i], params.temperature);
  std::vector<int32_t> survivors;
  for (size_t i = 0; i < z.size(); ++i) {
    if (z[i] > -INFINITY) survivors.push_back(static_cast<int32_t>(i));
  }
  if (survivors.empty()) {
    result.token_id = 0;
    if (params.logprobs) {
      if (raw_logprobs) {
        fill_from_log_softmax(logits, params.top_logprobs, result);
      } else {
        result.logprob = -INFINITY;
      }
    }
    return result;
  }
  const float z_max = *std::max_element(z.begin(), z.end());
  std::vector<float> w(z.size(), 0.0f);
  std::vector<uint64_t> w_fixed(z.size(), 0);
  for (const int32_t id : survivors) {
    w[static_cast<size_t>(id)] = sampling_rule::weight(z[static_cast<size_t>(id)], z_max);
    w_fixed[static_cast<size_t>(id)] = sampling_rule::fixed_weight(w[static_cast<size_t>(id)]);
  }
  std::vector<int32_t> ranked = survivors;
  std::sort(ranked.begin(), ranked.end(), sampling_rule::RankLess{w, x, params.temperature});

  // top-k
  size_t n_candidates = ranked.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < ranked.size()) {
    n_candidates = static_cast<size_t>(params.top_k);
  }
  uint64_t candidate_mass = 0;
  for (size_t j = 0; j < n_candidates; ++j) candidate_mass += w_fixed[static_cast<size_t>(ranked[j])];
  // top-p, then min-p, token by token in rank order
  size_t n_kept = 0;
  uint64_t kept_mass = 0;
  const double top_p_mass = static_cast<double>(candidate_mass) * params.top_p;
  for (; n_kept < n_candidates; ++n_kept) {
    const size_t id = static_cast<size_t>(ranked[n_kept]);
    if (params.top_p < 1.0f && !sampling_rule::below_top_p(kept_mass, top_p_mass)) break;
    if (params.min_p > 0.0f && w[id] < params.min_p) break;
    kept_mass += w_fixed[id];
  }

  // draw
  const uint64_t target =
      sampling_rule::draw_target(philox_uniform(params.seed, position, draft_slot), kept_mass);
  uint64_t running = 0;
  for (size_t j = 0; j < n_kept; ++j) {
    running += w_fixed[static_cast<size_t>(ranked[j])];
    if (running > target) {
      result.token_id = ranked[j];
      break;
    }
  }

  if (params.logprobs) {
    if (raw_logprobs) {
      fill_from_log_softmax(logits, params.top_logprobs, result);
    } else {
      const auto lp = [&](int32_t id) {
        return static_cast<float>(std::log(static_cast<double>(w_fixed[static_cast<size_t>(id)])) -
                                  std::log(static_cast<double>(kept_mass)));
      };
      result.logprob = lp(result.token_id);
      result.n_top = std::min<int32_t>(params.top_logprobs, static_cast<int32_t>(n_kept));
      for (int i = 0; i < result.n_top; ++i) {
        result.top[static_cast<size_t>(i)] = {ranked[static_cast<size_t>(i)],
                                              lp(ranked[static_cast<size_t>(i)])};
      }
    }
  }
  return result;
}

}  // namespace ds
