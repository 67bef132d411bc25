// The threads of a P/D service's transfers: one per transfer (each owns its UCX worker, which is
// single-threaded), reaped as they finish, all joined on destruction. Every job's waits are bounded,
// so the join is too.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace ds::pd {

class JobThreads {
 public:
  JobThreads() = default;
  ~JobThreads();
  JobThreads(const JobThreads&) = delete;
  JobThreads& operator=(const JobThreads&) = delete;

  // Runs `job` on a new thread; false (job not run) when max_jobs are running.
  bool start(std::function<void()> job, int max_jobs);
  int n_running() const;

 private:
  struct Job {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void reap_locked();

  mutable std::mutex mu_;
  std::list<std::unique_ptr<Job>> jobs_;
};

}  // namespace ds::pd
