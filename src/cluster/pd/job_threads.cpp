#include "cluster/pd/job_threads.h"

#include <utility>

namespace ds::pd {

JobThreads::~JobThreads() {
  std::list<std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.swap(jobs_);
  }
  for (auto& j : jobs) j->thread.join();
}

bool JobThreads::start(std::function<void()> job, int max_jobs) {
  std::lock_guard<std::mutex> lock(mu_);
  reap_locked();
  if (static_cast<int>(jobs_.size()) >= max_jobs) return false;
  auto& j = jobs_.emplace_back(std::make_unique<Job>());
  Job* raw = j.get();
  raw->thread = std::thread([raw, job = std::move(job)] {
    job();
    raw->done.store(true);
  });
  return true;
}

int JobThreads::n_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& j : jobs_) n += j->done.load() ? 0 : 1;
  return n;
}

void JobThreads::reap_locked() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ds::pd
