#include "cluster/router/policy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>

namespace ds::cluster {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The least loaded eligible worker; ties go to the smallest index, then the lowest position.
int least_loaded(const std::vector<WorkerView>& w) {
  int best = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!w[i].eligible) continue;
    if (best < 0 || w[i].load < w[best].load ||
        (w[i].load == w[best].load && w[i].index_blocks < w[best].index_blocks)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

class LeastLoadPolicy final : public Policy {
 public:
  Decision choose(const RouteInput& in) override { return {least_loaded(in.workers), "least_load"}; }
};

class RoundRobinPolicy final : public Policy {
 public:
  Decision choose(const RouteInput& in) override {
    const size_t n = in.workers.size();
    if (n == 0) return {};
    const size_t start = next_.fetch_add(1, std::memory_order_relaxed);
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (start + k) % n;
      if (in.workers[i].eligible) return {static_cast<int>(i), "round_robin"};
    }
    return {};
  }

 private:
  std::atomic<size_t> next_{0};
};

class RandomPolicy final : public Policy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}
  Decision choose(const RouteInput& in) override {
    std::vector<int> eligible;
    for (size_t i = 0; i < in.workers.size(); ++i)
      if (in.workers[i].eligible) eligible.push_back(static_cast<int>(i));
    if (eligible.empty()) return {};
    std::lock_guard lock(mu_);
    std::uniform_int_distribution<size_t> pick(0, eligible.size() - 1);
    return {eligible[pick(rng_)], "random"};
  }

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;
};

class CacheAwarePolicy final : public Policy {
 public:
  explicit CacheAwarePolicy(const CacheAwareThresholds& t) : t_(t) {}

  Decision choose(const RouteInput& in) override {
    const auto& w = in.workers;
    int64_t min_load = INT64_MAX, max_load = INT64_MIN;
    for (const WorkerView& v : w) {
      if (!v.eligible) continue;
      min_load = std::min(min_load, v.load);
      max_load = std::max(max_load, v.load);
    }
    if (min_load == INT64_MAX) return {};
    const bool imbalanced =
        max_load - min_load > t_.balance_abs_threshold &&
        static_cast<double>(max_load) > static_cast<double>(min_load) * t_.balance_rel_threshold;
    if (imbalanced) return {least_loaded(w), "imbalanced"};

    int best = -1;
    for (size_t i = 0; i < w.size(); ++i) {
      if (!w[i].eligible) continue;
      if (best < 0 || w[i].matched_blocks > w[best].matched_blocks ||
          (w[i].matched_blocks == w[best].matched_blocks && w[i].load < w[best].load)) {
        best = static_cast<int>(i);
      }
    }
    if (in.n_prompt_blocks > 0 && w[best].matched_blocks > 0) {
      const double rate =
          static_cast<double>(w[best].matched_blocks) / static_cast<double>(in.n_prompt_blocks);
      if (rate > t_.cache_threshold) return {best, "cache_hit"};
    }
    if (in.session_hash) return {consistent_pick(w, *in.session_hash, t_.session_load_bound), "session"};
    return {least_loaded(w), "least_load"};
  }

 private:
  const CacheAwareThresholds t_;
};

}  // namespace

Result<PolicyKind> parse_policy(std::string_view name) {
  if (name == "cache_aware") return PolicyKind::cache_aware;
  if (name == "least_load") return PolicyKind::least_load;
  if (name == "round_robin") return PolicyKind::round_robin;
  if (name == "random") return PolicyKind::random;
  return Status(
      ErrorCode::invalid_argument,
      "unknown policy '" + std::string(name) + "' (expected cache_aware, least_load, round_robin or random)");
}

const char* policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::cache_aware:
      return "cache_aware";
    case PolicyKind::least_load:
      return "least_load";
    case PolicyKind::round_robin:
      return "round_robin";
    case PolicyKind::random:
      return "random";
  }
  return "unknown";
}

std::unique_ptr<Policy> make_policy(PolicyKind kind, const CacheAwareThresholds& thresholds, uint64_t seed) {
  switch (kind) {
    case PolicyKind::cache_aware:
      return std::make_unique<CacheAwarePolicy>(thresholds);
    case PolicyKind::least_load:
      return std::make_unique<LeastLoadPolicy>();
    case PolicyKind::round_robin:
      return std::make_unique<RoundRobinPolicy>();
    case PolicyKind::random:
      return std::make_unique<RandomPolicy>(seed);
  }
  return nullptr;
}

int consistent_pick(const std::vector<WorkerView>& workers, uint64_t key, double c) {
  int64_t total = 0;
  size_t n_eligible = 0;
  for (const WorkerView& v : workers) {
    if (!v.eligible) continue;
    total += v.load;
    ++n_eligible;
  }
  if (n_eligible == 0) return -1;
  const auto bound =
      static_cast<int64_t>(std::ceil(c * static_cast<double>(total + 1) / static_cast<double>(n_eligible)));
  // Workers by descending rendezvous weight; the first within the bound wins (one always is: not
  // every worker can be above c times the mean).
  std::vector<std::pair<uint64_t, int>> ranked;
  for (size_t i = 0; i < workers.size(); ++i)
    if (workers[i].eligible) ranked.emplace_back(mix(key ^ workers[i].identity_hash), static_cast<int>(i));
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [weight, i] : ranked)
    if (workers[i].load + 1 <= bound) return i;
  return ranked.front().second;
}

}  // namespace ds::cluster
