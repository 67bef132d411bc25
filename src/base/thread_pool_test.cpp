#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ds {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {0, 1, 3, 100, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, RangeChunksCoverInputAlignedToGrain) {
  ThreadPool pool(3);
  for (int64_t n : {1, 15, 16, 17, 100, 4096}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_range(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      EXPECT_LT(b, e);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ReusableManyTimes) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep) pool.parallel_for(4, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 2000 * 6);
}

}  // namespace
}  // namespace ds
