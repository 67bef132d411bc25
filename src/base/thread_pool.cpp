#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace ds {

ThreadPool::ThreadPool(int n_threads) {
  const int n_workers = std::max(0, n_threads - 1);
  workers_.reserve(n_workers);
  for (int i = 0; i < n_workers; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int /*worker_idx*/) {
  uint64_t seen_generation = 0;
  for (;;) {
    const std::function<void(int64_t)>* job = nullptr;
    std::atomic<int64_t>* next = nullptr;
    int64_t n_tasks = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen_generation; });
      if (stop_) return;
      seen_generation = generation_;
      job = job_;
      next = next_task_;
      n_tasks = n_tasks_;
    }
    for (int64_t t = next->fetch_add(1); t < n_tasks; t = next->fetch_add(1)) (*job)(t);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--n_busy_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  std::atomic<int64_t> next{0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_ = &next;
    n_busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  for (int64_t t = next.fetch_add(1); t < n_tasks; t = next.fetch_add(1)) fn(t);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return n_busy_ == 0; });
  job_ = nullptr;
  next_task_ = nullptr;
}

void ThreadPool::parallel_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t n_chunks = std::min<int64_t>(n_threads(), n_grains);
  parallel_for(n_chunks, [&](int64_t c) {
    const int64_t g0 = n_grains * c / n_chunks;
    const int64_t g1 = n_grains * (c + 1) / n_chunks;
    const int64_t begin = g0 * grain;
    const int64_t end = std::min(n, g1 * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace ds
