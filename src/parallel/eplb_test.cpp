// EPLB against DeepSeek's published example (github.com/deepseek-ai/EPLB README: 12 experts in 4
// groups, 16 physical slots, 2 nodes, 8 ranks) and the global policy's output on the same loads
// (computed with the Python original), plus invariants on random loads.
#include "parallel/eplb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ds {
namespace {

const std::vector<std::vector<float>> kLoads = {
    {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
    {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27},
};

TEST(Eplb, HierarchicalMatchesDeepSeekExample) {
  const std::vector<std::vector<int32_t>> want_slots = {
      {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
      {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1},
  };
  const std::vector<std::vector<int32_t>> want_replica = {
      {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0},
      {0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0},
  };
  const std::vector<std::vector<int32_t>> want_count = {
      {1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1},
      {1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1},
  };
  for (size_t layer = 0; layer < kLoads.size(); ++layer) {
    Result<EplbPlacement> p = eplb_rebalance(kLoads[layer], EplbShape{16, 4, 2, 8});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_TRUE(p->hierarchical);
    EXPECT_EQ(p->slot_expert, want_slots[layer]) << "layer " << layer;
    EXPECT_EQ(p->slot_replica, want_replica[layer]) << "layer " << layer;
    EXPECT_EQ(p->replica_count, want_count[layer]) << "layer " << layer;
  }
}

TEST(Eplb, GlobalWhenGroupsDoNotDivideOverNodes) {
  const std::vector<std::vector<int32_t>> want_slots = {
      {10, 6, 10, 7, 0, 2, 11, 4, 5, 9, 5, 4, 8, 3, 1, 1},
      {1, 10, 2, 4, 5, 11, 5, 0, 6, 7, 6, 3, 8, 8, 9, 7},
  };
  for (size_t layer = 0; layer < kLoads.size(); ++layer) {
    // 3 groups over 2 nodes: the global policy (as one group on one node).
    Result<EplbPlacement> p = eplb_rebalance(kLoads[layer], EplbShape{16, 3, 2, 8});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_FALSE(p->hierarchical);
    EXPECT_EQ(p->slot_expert, want_slots[layer]) << "layer " << layer;
  }
}

TEST(Eplb, InvariantsOnRandomLoads) {
  std::mt19937 rng(7);
  std::exponential_distribution<float> skewed(0.05f);
  for (int trial = 0; trial < 200; ++trial) {
    const int n_nodes = 1 + static_cast<int>(rng() % 3);
    const int n_ranks = n_nodes * (1 + static_cast<int>(rng() % 4));
    const int n_groups = n_nodes * (1 + static_cast<int>(rng() % 3));
    const int64_t n_experts = int64_t{n_groups} * (1 + static_cast<int64_t>(rng() % 4));
    int64_t n_physical = std::max<int64_t>(n_experts, n_ranks) + static_cast<int64_t>(rng() % 5);
    n_physical += (n_ranks - n_physical % n_ranks) % n_ranks;  // a multiple of the rank count
    if (n_physical % n_nodes != 0) continue;
    std::vector<float> load(static_cast<size_t>(n_experts));
    for (float& v : load) v = std::floor(skewed(rng));
    Result<EplbPlacement> p = eplb_rebalance(load, EplbShape{n_physical, n_groups, n_nodes, n_ranks});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(static_cast<int64_t>(p->slot_expert.size()), n_physical);
    std::vector<std::vector<int32_t>> copies(static_cast<size_t>(n_experts));
    for (size_t s = 0; s < p->slot_expert.size(); ++s) {
      const int32_t e = p->slot_expert[s];
      ASSERT_TRUE(e >= 0 && e < n_experts);
      copies[static_cast<size_t>(e)].push_back(p->slot_replica[s]);
    }
    for (int64_t e = 0; e < n_experts; ++e) {
      std::vector<int32_t>& c = copies[static_cast<size_t>(e)];
      ASSERT_EQ(static_cast<int32_t>(c.size()), p->replica_count[static_cast<size_t>(e)]) << "expert " << e;
      std::sort(c.begin(), c.end());
      for (size_t i = 0; i < c.size(); ++i)
        EXPECT_EQ(c[i], static_cast<int32_t>(i)) << "replica ranks 0..n-1";
    }
    // Hierarchical: a node holds whole groups (each expert's copies on one node).
    if (p->hierarchical) {
      const int64_t per_node = n_physical / n_nodes, group_size = n_experts / n_groups;
      std::vector<int> node_of_group(static_cast<size_t>(n_groups), -1);
      for (size_t s = 0; s < p->slot_expert.size(); ++s) {
        const int node = static_cast<int>(static_cast<int64_t>(s) / per_node);
        int& g = node_of_group[static_cast<size_t>(p->slot_expert[s] / group_size)];
        if (g < 0) g = node;
        EXPECT_EQ(g, node) << "group of expert " << p->slot_expert[s] << " split over nodes";
      }
    }
    EXPECT_GE(rank_imbalance(load, *p, n_ranks), 1.0 - 1e-9);
  }
}

TEST(Eplb, RedundantExpertsLowerImbalanceOfASkewedLoad) {
  // One hot expert out of 8 on 4 ranks: without copies its rank serves far more than the mean.
  const std::vector<float> load = {800, 10, 10, 10, 10, 10, 10, 10};
  Result<EplbPlacement> none = eplb_rebalance(load, EplbShape{8, 1, 1, 4});
  Result<EplbPlacement> four = eplb_rebalance(load, EplbShape{12, 1, 1, 4});
  ASSERT_TRUE(none.ok() && four.ok());
  EXPECT_EQ(four->replica_count[0], 5);
  EXPECT_LT(rank_imbalance(load, *four, 4), rank_imbalance(load, *none, 4));
}

TEST(Eplb, RejectsShapesItCannotPlace) {
  const std::vector<float> load(8, 1.0f);
  EXPECT_EQ(eplb_rebalance(load, EplbShape{10, 1, 1, 4}).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(eplb_rebalance(load, EplbShape{4, 1, 1, 4}).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(eplb_rebalance(load, EplbShape{8, 3, 1, 4}).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(eplb_rebalance(std::vector<float>{1, -1}, EplbShape{2, 1, 1, 1}).status().code(),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ds
