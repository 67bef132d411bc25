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
      for (size_t e = 1; e < p->owner.size(); ++e) EXPECT_GE(p->owner[e], p->owner[e - 1]);
    }
  }
}

TEST(ExpertPlacement, RejectsMoreRanksThanExperts) {
  EXPECT_EQ(ExpertPlacement::contiguous(2, 4).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(ExpertPlacement::contiguous(8, 0).status().code(), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ds
