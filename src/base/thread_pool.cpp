#include "base/thread_pool.h"

#include <algorithm>

namespace ds {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `done` until it returns true or `spin` has passed; true when it did.
template <class Done>
bool spin_until(Done&& done, std::chrono::nanoseconds spin) {
  if (spin.count() <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + spin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 63 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::chrono::microseconds spin) : spin_(spin) {
  const int n_workers = std::max(0, n_threads - 1);
  workers_.reserve(n_workers);
  for (int i = 0; i < n_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  { std::lock_guard<std::mutex> lock(mu_); }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  uint64_t g = seen;
  auto has_job = [&] {
    g = generation_.load();
    return g != seen || stop_.load();
  };
  if (spin_until(has_job, spin_)) return g;
  std::unique_lock<std::mutex> lock(mu_);
  n_sleeping_.fetch_add(1);
  work_cv_.wait(lock, has_job);
  n_sleeping_.fetch_sub(1);
  return g;
}

void ThreadPool::run_tasks() {
  for (int64_t t = next_task_.fetch_add(1); t < n_tasks_; t = next_task_.fetch_add(1)) (*job_)(t);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load()) return;
    run_tasks();
    if (n_busy_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      { std::lock_guard<std::mutex> lock(mu_); }
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::wait_for_workers() {
  auto all_done = [&] { return n_busy_.load() == 0; };
  if (spin_until(all_done, spin_)) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true);
  done_cv_.wait(lock, all_done);
  caller_sleeping_.store(false);
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  job_ = &fn;
  n_tasks_ = n_tasks;
  next_task_.store(0);
  n_busy_.store(static_cast<int>(workers_.size()));
  generation_.fetch_add(1);  // publishes the job (sequentially consistent: ordered before the check below)
  if (n_sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_all();
  }
  run_tasks();
  wait_for_workers();
  job_ = nullptr;
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
