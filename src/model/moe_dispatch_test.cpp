// The grouped dispatch -> expert -> combine path against a plain per-token reference: each row
// alone, its experts in ascending id, on random inputs. A toy expert (y = W_e · x, summed in a
// fixed order per row) makes the result of a row independent of the rows batched with it, as the
// real matmuls are, so the two must agree bit for bit.
#include "model/moe_dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ds {
namespace {

struct ToyExperts {
  int64_t n_experts = 0, hidden = 0;
  std::vector<float> w;  // [n_experts, hidden, hidden]
  int calls = 0;

  void row(int32_t e, const float* x, float* y) const {
    const float* we = w.data() + static_cast<int64_t>(e) * hidden * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      float acc = 0;
      for (int64_t j = 0; j < hidden; ++j) acc += we[i * hidden + j] * x[j];
      y[i] = acc;
    }
  }
  LocalExpertRunner runner(std::vector<int>& rows_per_expert) {
    return [this, &rows_per_expert](std::span<const ExpertRows> groups) {
      ++calls;
      for (const ExpertRows& g : groups) {
        rows_per_expert[static_cast<size_t>(g.expert)] += static_cast<int>(g.n_rows);
        for (int64_t r = 0; r < g.n_rows; ++r) row(g.expert, g.x + r * hidden, g.y + r * hidden);
      }
    };
  }
};

struct Case {
  int64_t n_rows, top_k, hidden, n_experts;
};

class MoeDispatch : public ::testing::TestWithParam<Case> {};

TEST_P(MoeDispatch, GroupedEqualsPerTokenReference) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.n_rows * 131 + c.top_k * 7 + c.n_experts));
  std::normal_distribution<float> normal;
  ToyExperts toy{c.n_experts, c.hidden,
                 std::vector<float>(static_cast<size_t>(c.n_experts * c.hidden * c.hidden))};
  for (float& v : toy.w) v = normal(rng);
  std::vector<float> x(static_cast<size_t>(c.n_rows * c.hidden)),
      weight(static_cast<size_t>(c.n_rows * c.top_k));
  for (float& v : x) v = normal(rng);
  for (float& v : weight) v = std::abs(normal(rng));
  // Distinct experts per row, in a random (not sorted) order, as a router returns them.
  std::vector<int32_t> expert(static_cast<size_t>(c.n_rows * c.top_k));
  std::vector<int32_t> ids(static_cast<size_t>(c.n_experts));
  for (int64_t t = 0; t < c.n_rows; ++t) {
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::copy_n(ids.begin(), c.top_k, expert.begin() + t * c.top_k);
  }
  const RoutedChoices in{x.data(), c.n_rows, c.top_k, c.hidden, expert.data(), weight.data()};

  for (bool apply_weight : {true, false}) {
    std::vector<float> base(static_cast<size_t>(c.n_rows * c.hidden));
    for (float& v : base) v = normal(rng);
    std::vector<float> got = base, want = base;
    std::vector<int> rows_per_expert(static_cast<size_t>(c.n_experts), 0);
    MoeDispatchScratch s;
    std::vector<float> y_choice(static_cast<size_t>(c.n_rows * c.top_k * c.hidden), -1.0f);
    toy.calls = 0;
    run_experts_here(in, c.n_experts, toy.runner(rows_per_expert), s, y_choice.data());
    combine_routed(in, y_choice.data(), apply_weight, got.data());
    EXPECT_EQ(toy.calls, 1) << "the runner is called once per forward";

    std::vector<float> y(static_cast<size_t>(c.hidden));
    for (int64_t t = 0; t < c.n_rows; ++t) {
      std::vector<int64_t> ks(static_cast<size_t>(c.top_k));
      std::iota(ks.begin(), ks.end(), 0);
      std::sort(ks.begin(), ks.end(), [&](int64_t a, int64_t b) {
        return expert[static_cast<size_t>(t * c.top_k + a)] < expert[static_cast<size_t>(t * c.top_k + b)];
      });
      for (int64_t k : ks) {
        const int64_t ch = t * c.top_k + k;
        toy.row(expert[static_cast<size_t>(ch)], x.data() + t * c.hidden, y.data());
        for (int64_t i = 0; i < c.hidden; ++i)
          want[static_cast<size_t>(t * c.hidden + i)] +=
              apply_weight ? weight[static_cast<size_t>(ch)] * y[i] : y[i];
      }
    }
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << "row " << i / static_cast<size_t>(c.hidden) << " col " << i % static_cast<size_t>(c.hidden)
          << ": " << got[i] << " vs " << want[i] << (apply_weight ? " (weighted)" : " (unweighted)");
    }
    // Each expert saw exactly the rows that chose it: its weights are read once for all of them.
    std::vector<int> chosen_by(static_cast<size_t>(c.n_experts), 0);
    for (int32_t e : expert) ++chosen_by[static_cast<size_t>(e)];
    EXPECT_EQ(rows_per_expert, chosen_by);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeDispatch,
                         ::testing::Values(Case{0, 2, 4, 4}, Case{1, 1, 3, 2}, Case{1, 6, 8, 16},
                                           Case{5, 2, 7, 8}, Case{64, 8, 16, 32}, Case{33, 3, 5, 3}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return "rows" + std::to_string(c.n_rows) + "_k" + std::to_string(c.top_k) + "_h" +
                                  std::to_string(c.hidden) + "_e" + std::to_string(c.n_experts);
                         });

TEST(GroupByExpert, StableCountingSort) {
  const std::vector<int32_t> expert{3, 1, 3, 0, 1, 3};
  ExpertGroups g;
  group_by_expert(expert.data(), static_cast<int64_t>(expert.size()), 5, g);
  EXPECT_EQ(g.first, (std::vector<int64_t>{0, 1, 3, 3, 6, 6}));
  EXPECT_EQ(g.order, (std::vector<int64_t>{3, 1, 4, 0, 2, 5}));
}

}  // namespace
}  // namespace ds
