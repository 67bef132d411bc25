// A fixed set of worker threads for data-parallel loops (kernels split output rows over it).
// Owned by whoever builds the model/engine and passed down explicitly (no global pool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds {

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) spawns no workers.
  explicit ThreadPool(int n_threads);
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
  void worker_loop(int worker_idx);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // Guarded by mu_: the current job.
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t n_tasks_ = 0;
  uint64_t generation_ = 0;
  int n_busy_ = 0;
  bool stop_ = false;
  std::atomic<int64_t>* next_task_ = nullptr;
};

}  // namespace ds
