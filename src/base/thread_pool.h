// A fixed set of worker threads for data-parallel loops (kernels split output rows over it).
// Owned by whoever builds the model/engine and passed down explicitly (no global pool).
//
// Hand-off: a job is published through an atomic generation counter. An idle worker polls it for
// `spin` (pausing between polls) before it sleeps on a condition variable, and the caller polls for
// its workers' completion the same way, so the back-to-back matmuls of a decode step (~100 per token,
// a few microseconds apart) reach the workers without a futex wake-up each; a pool left idle longer
// than `spin` costs no CPU. spin = 0 sleeps at once (the pure condition-variable pool).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds {

class ThreadPool {
 public:
  static constexpr std::chrono::microseconds kDefaultSpin{100};

  // n_threads counts the calling thread: ThreadPool(1) spawns no workers.
  explicit ThreadPool(int n_threads, std::chrono::microseconds spin = kDefaultSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task_idx) for task_idx in [0, n_tasks), spread over all threads (the caller
  // works too); returns when every task has finished. Tasks must be independent.
  // Not re-entrant: call only from one thread at a time, never from inside a task.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t)>& fn);

  // Splits [0, n) into n_threads() contiguous chunks aligned to `grain` and calls
  // fn(begin, end) once per non-empty chunk. The split depends only on n, grain and
  // n_threads(), never on timing.
  void parallel_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  // The first generation other than `seen` (or any value once stop_ is set): polled for spin_, then
  // slept for.
  uint64_t wait_for_job(uint64_t seen);
  void wait_for_workers();
  void run_tasks();

  std::vector<std::thread> workers_;
  const std::chrono::nanoseconds spin_;
  // The current job: written by the caller before it bumps generation_, read by workers after they
  // see the bump; stable until every worker has counted itself out of n_busy_.
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> n_busy_{0};      // workers still inside the current job
  std::atomic<int> n_sleeping_{0};  // workers asleep on work_cv_ (or about to be)
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  // Sleeping only: the atomics above carry the hand-off; mu_ orders a sleeper's last check against a
  // waker's notify (sequentially consistent flag + counter on both sides, so no wake-up is lost).
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
};

}  // namespace ds
