#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// Both hand-off paths: jobs published while the workers still poll, and after they went to sleep
// (gaps longer than the spin), with tasks longer than the spin so the caller sleeps for its workers
// too; spin = 0 sleeps every time. Every task runs exactly once and every call returns.
TEST(ThreadPool, SpinningAndSleepingHandOffsRunEveryTask) {
  using std::chrono::microseconds;
  for (microseconds spin : {microseconds{0}, microseconds{20}, ThreadPool::kDefaultSpin}) {
    ThreadPool pool(3, spin);
    std::atomic<int64_t> sum{0};
    int64_t want = 0;
    for (int rep = 0; rep < 300; ++rep) {
      if (rep % 50 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
      const bool slow = rep % 50 == 21;  // tasks outlast the spin: the caller sleeps
      pool.parallel_for(5, [&](int64_t i) {
        if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        sum += i + rep;
      });
      want += 10 + 5 * rep;
    }
    EXPECT_EQ(sum.load(), want) << "spin " << spin.count() << " us";
  }
}

// A pool destroyed right after a call, and one destroyed while its workers sleep, shut down.
TEST(ThreadPool, DestroysCleanlyWhetherWorkersSpinOrSleep) {
  for (int rep = 0; rep < 50; ++rep) {
    ThreadPool pool(2);
    std::atomic<int> n{0};
    pool.parallel_for(2, [&](int64_t) { n++; });
    EXPECT_EQ(n.load(), 2);
  }
  ThreadPool idle(2, std::chrono::microseconds{1});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace
}  // namespace ds
