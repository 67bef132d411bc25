#include "cluster/router/policy.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace ds::cluster {
namespace {

RouteInput input(std::vector<int64_t> loads, std::vector<size_t> matched, size_t n_blocks) {
  RouteInput in;
  in.n_prompt_blocks = n_blocks;
  for (size_t i = 0; i < loads.size(); ++i) {
    WorkerView v;
    v.eligible = true;
    v.load = loads[i];
    v.matched_blocks = i < matched.size() ? matched[i] : 0;
    v.identity_hash = 0x1000 + i * 7919;
    in.workers.push_back(v);
  }
  return in;
}

TEST(Policy, ParseNames) {
  for (const char* n : {"cache_aware", "least_load", "round_robin", "random"})
    EXPECT_STREQ(policy_name(*parse_policy(n)), n);
  EXPECT_FALSE(parse_policy("fastest").ok());
}

TEST(CacheAware, TakesTheBestMatchAboveTheThreshold) {
  auto p = make_policy(PolicyKind::cache_aware, {}, 0);
  Decision d = p->choose(input({5, 1, 3}, {0, 2, 9}, 10));
  EXPECT_EQ(d.worker, 2);
  EXPECT_STREQ(d.reason, "cache_hit");
  // 5 of 10 blocks is not above 0.5: the least loaded worker instead.
  d = p->choose(input({5, 1, 3}, {0, 2, 5}, 10));
  EXPECT_EQ(d.worker, 1);
  EXPECT_STREQ(d.reason, "least_load");
}

TEST(CacheAware, ImbalanceBeatsTheCache) {
  auto p = make_policy(PolicyKind::cache_aware, {}, 0);
  // 40 - 2 > 32 and 40 > 2 * 1.0001: balance, although worker 0 has all blocks.
  Decision d = p->choose(input({40, 2}, {10, 0}, 10));
  EXPECT_EQ(d.worker, 1);
  EXPECT_STREQ(d.reason, "imbalanced");
  // 33 - 2 = 31 is within the absolute threshold: the cache wins.
  d = p->choose(input({33, 2}, {10, 0}, 10));
  EXPECT_EQ(d.worker, 0);
  // Thresholds are configurable.
  CacheAwareThresholds t;
  t.balance_abs_threshold = 4;
  d = make_policy(PolicyKind::cache_aware, t, 0)->choose(input({8, 2}, {10, 0}, 10));
  EXPECT_EQ(d.worker, 1);
}

TEST(CacheAware, SessionsStickWithBoundedLoad) {
  auto p = make_policy(PolicyKind::cache_aware, {}, 0);
  std::map<int, int> per_worker;
  std::set<int> seen;
  for (uint64_t key = 0; key < 200; ++key) {
    RouteInput in = input({0, 0, 0, 0}, {}, 4);
    in.session_hash = key * 0x9e3779b97f4a7c15ull;
    const Decision first = p->choose(in);
    EXPECT_STREQ(first.reason, "session");
    EXPECT_EQ(p->choose(in).worker, first.worker);  // the same session, the same worker
    ++per_worker[first.worker];
  }
  EXPECT_EQ(per_worker.size(), 4u);  // keys spread over every worker
  // Bounded load: the session's worker is skipped when it is far above the mean.
  RouteInput in = input({0, 0, 0}, {}, 4);
  in.session_hash = 42;
  const int home = p->choose(in).worker;
  in.workers[static_cast<size_t>(home)].load = 10;
  const Decision moved = p->choose(in);
  EXPECT_NE(moved.worker, home);
}

TEST(Policies, SkipIneligibleWorkers) {
  for (PolicyKind k :
       {PolicyKind::cache_aware, PolicyKind::least_load, PolicyKind::round_robin, PolicyKind::random}) {
    auto p = make_policy(k, {}, 7);
    RouteInput in = input({9, 0, 5}, {10, 10, 0}, 10);
    in.workers[1].eligible = false;
    for (int i = 0; i < 20; ++i) EXPECT_NE(p->choose(in).worker, 1) << policy_name(k);
    for (auto& w : in.workers) w.eligible = false;
    EXPECT_EQ(p->choose(in).worker, -1) << policy_name(k);
  }
}

TEST(Policies, RoundRobinCyclesAndLeastLoadTakesTheMinimum) {
  auto rr = make_policy(PolicyKind::round_robin, {}, 0);
  const RouteInput in = input({3, 1, 2}, {}, 0);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) order.push_back(rr->choose(in).worker);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(make_policy(PolicyKind::least_load, {}, 0)->choose(in).worker, 1);
  std::set<int> drawn;
  auto random = make_policy(PolicyKind::random, {}, 3);
  for (int i = 0; i < 100; ++i) drawn.insert(random->choose(in).worker);
  EXPECT_EQ(drawn.size(), 3u);
}

}  // namespace
}  // namespace ds::cluster
