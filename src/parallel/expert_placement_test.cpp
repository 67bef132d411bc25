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

TEST(ExpertPlacement, ImbalanceIsMaxOverMeanOfRankLoad) {
  Result<ExpertPlacement> p = ExpertPlacement::contiguous(4, 2);  // {0,1} on rank 0, {2,3} on rank 1
  ASSERT_TRUE(p.ok());
  const std::vector<float> even = {1, 1, 1, 1};
  EXPECT_DOUBLE_EQ(placement_imbalance(even, *p), 1.0);
  const std::vector<float> skewed = {6, 0, 1, 1};  // rank 0 serves 6 of 8: 6 / 4
  EXPECT_DOUBLE_EQ(placement_imbalance(skewed, *p), 1.5);
  const std::vector<float> none = {0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(placement_imbalance(none, *p), 1.0);
  // A second copy of expert 0 on rank 1 splits its load: rank 0 serves 3, rank 1 serves 5.
  ExpertPlacement copies = *p;
  copies.holders[0] = {0, 1};
  EXPECT_DOUBLE_EQ(placement_imbalance(skewed, copies), 1.25);
}

TEST(ExpertPlacement, EplbPlacementLowersTheImbalanceOfItsLoad) {
  const std::vector<float> load = {800, 10, 10, 10, 10, 10, 10, 10};
  Result<ExpertPlacement> before = ExpertPlacement::contiguous(8, 4);
  Result<EplbPlacement> eplb = eplb_rebalance(load, EplbShape{12, 1, 1, 4});
  ASSERT_TRUE(before.ok() && eplb.ok());
  Result<ExpertPlacement> after = ExpertPlacement::from_eplb(*eplb, 8, 4);
  ASSERT_TRUE(after.ok());
  EXPECT_NEAR(placement_imbalance(load, *before), 810.0 / 217.5, 1e-9);  // rank 0: experts 0 and 1
  // Five copies of expert 0 (160 each) in 4 ranks x 3 slots: one rank holds two, 320 + 10.
  EXPECT_NEAR(placement_imbalance(load, *after), 330.0 / 217.5, 1e-9);
}

TEST(ExpertPlacement, MovesBringEveryNewCopyFromTheLowestOldHolder) {
  Result<ExpertPlacement> prev = ExpertPlacement::contiguous(4, 2);
  ASSERT_TRUE(prev.ok());
  prev->holders[3] = {1, 0};  // expert 3 on ranks 1 and 0
  ExpertPlacement next = *prev;
  next.holders[0] = {1};     // moves 0 -> 1
  next.holders[2] = {1, 0};  // copy 1 -> 0
  next.holders[3] = {1};     // dropped on rank 0: no move
  const std::vector<ExpertMove> moves = plan_expert_moves(*prev, next);
  const std::vector<ExpertMove> want = {{2, 1, 0}, {0, 0, 1}};  // by (to, expert)
  EXPECT_EQ(moves, want);
  EXPECT_TRUE(plan_expert_moves(*prev, *prev).empty());
  next.holders[1] = {1};  // moves 0 -> 1 too; sorted by (to, expert) it comes after expert 0
  const std::vector<ExpertMove> want2 = {{2, 1, 0}, {0, 0, 1}, {1, 0, 1}};
  EXPECT_EQ(plan_expert_moves(*prev, next), want2);
}

TEST(ExpertPlacement, AlignRanksKeepsExpertsWhereTheyAre) {
  Result<ExpertPlacement> current = ExpertPlacement::contiguous(8, 4);  // {0,1} {2,3} {4,5} {6,7}
  ASSERT_TRUE(current.ok());
  // The same blocks on rotated ranks: aligning gives the current placement back, nothing moves.
  ExpertPlacement rotated = *current;
  for (auto& h : rotated.holders) h[0] = (h[0] + 1) % 4;
  EXPECT_EQ(plan_expert_moves(*current, rotated).size(), 8u);
  const ExpertPlacement aligned = align_ranks(rotated, *current, 1);
  EXPECT_EQ(aligned.holders, current->holders);
  // With 2 nodes of 2 ranks only ranks of one node may trade places: ranks 0 and 1 swap back, but
  // {4,5} and {6,7}, moved to the other node, stay moved.
  ExpertPlacement crossed = *current;
  const std::vector<int32_t> to = {1, 0, 3, 2};  // swap within nodes
  for (auto& h : crossed.holders) h[0] = to[static_cast<size_t>(h[0])];
  EXPECT_EQ(align_ranks(crossed, *current, 2).holders, current->holders);
  ExpertPlacement across = *current;
  const std::vector<int32_t> swap_nodes = {2, 3, 0, 1};
  for (auto& h : across.holders) h[0] = swap_nodes[static_cast<size_t>(h[0])];
  EXPECT_EQ(align_ranks(across, *current, 2).holders, across.holders);
  // Rank loads are only renumbered: the imbalance is the same.
  const std::vector<float> load = {9, 1, 1, 1, 3, 3, 2, 2};
  EXPECT_DOUBLE_EQ(placement_imbalance(load, aligned), placement_imbalance(load, rotated));
}

TEST(ExpertPlacement, AlignedEplbPlacementMovesFewerExperts) {
  const std::vector<float> load = {30, 10, 10, 10, 12, 10, 10, 9, 11, 10, 10, 10};
  Result<ExpertPlacement> current = ExpertPlacement::contiguous(12, 4);
  Result<EplbPlacement> eplb = eplb_rebalance(load, EplbShape{16, 1, 1, 4});
  ASSERT_TRUE(current.ok() && eplb.ok());
  Result<ExpertPlacement> packed = ExpertPlacement::from_eplb(*eplb, 12, 4);
  ASSERT_TRUE(packed.ok());
  const ExpertPlacement aligned = align_ranks(*packed, *current, 1);
  EXPECT_LE(plan_expert_moves(*current, aligned).size(), plan_expert_moves(*current, *packed).size());
  EXPECT_DOUBLE_EQ(placement_imbalance(load, aligned), placement_imbalance(load, *packed));
  for (size_t e = 0; e < aligned.holders.size(); ++e)
    EXPECT_EQ(aligned.holders[e].size(), packed->holders[e].size()) << "same copies per expert";
}

}  // namespace
}  // namespace ds
