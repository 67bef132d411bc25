#include "parallel/expert_placement.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(ExpertPlacement, ContiguousBlocksCoverEveryExpertOnce) {
  for (int n_ranks : {1, 2, 3, 4, 7}) {
    for (int64_t n_experts : {int64_t{7}, int64_t{8}, int64_t{9}, int64_t{64}, int64_t{256}}) {
      if (n_experts < n_ranks) continue;
      Result<ExpertPlacement> p = ExpertPlacement::contiguous(n_experts, n_ranks);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      ASSERT_EQ(p->n_experts(), n_experts);
      int64_t covered = 0, most = 0, least = n_experts;
      for (int r = 0; r < n_ranks; ++r) {
        const std::vector<int32_t> local = p->local_experts(r);
        covered += static_cast<int64_t>(local.size());
        most = std::max<int64_t>(most, static_cast<int64_t>(local.size()));
        least = std::min<int64_t>(least, static_cast<int64_t>(local.size()));
        for (size_t i = 1; i < local.size(); ++i)
          EXPECT_EQ(local[i], local[i - 1] + 1) << "blocks are contiguous";
      }
      EXPECT_EQ(covered, n_experts);
      EXPECT_LE(most - least, 1) << n_experts << " experts over " << n_ranks << " ranks";
      for (size_t e = 0; e < p->holders.size(); ++e) {
        ASSERT_EQ(p->holders[e].size(), 1u) << "one copy each";
        if (e > 0) {
          EXPECT_GE(p->holders[e][0], p->holders[e - 1][0]);
        }
      }
    }
  }
}

TEST(ExpertPlacement, RejectsMoreRanksThanExperts) {
  EXPECT_EQ(ExpertPlacement::contiguous(2, 4).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(ExpertPlacement::contiguous(8, 0).status().code(), ErrorCode::invalid_argument);
}

TEST(ExpertPlacement, FromEplbSpreadsCopiesAndTakesThemInTurn) {
  const std::vector<float> load = {800, 10, 10, 10, 10, 10, 10, 10};
  Result<EplbPlacement> eplb = eplb_rebalance(load, EplbShape{12, 1, 1, 4});
  ASSERT_TRUE(eplb.ok());
  Result<ExpertPlacement> p = ExpertPlacement::from_eplb(*eplb, 8, 4);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->holders[0].size(), 5u);  // the hot expert's copies
  std::vector<int> served(4, 0);
  for (int64_t key = 0; key < 20; ++key) {
    const int r = p->rank_for(0, key);
    EXPECT_TRUE(p->holds(r, 0));
    ++served[static_cast<size_t>(r)];
  }
  for (int r = 0; r < 4; ++r) EXPECT_GT(served[static_cast<size_t>(r)], 0) << "rank " << r << " holds a copy";
  int64_t slots = 0;
  for (const auto& h : p->holders) slots += static_cast<int64_t>(h.size());
  EXPECT_EQ(slots, 12);
}

}  // namespace
}  // namespace ds
