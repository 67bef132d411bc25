#include "engine/step_executor.h"

#include <utility>

#include "base/assert.h"
#include "base/clock.h"

namespace ds {

StepExecutor::StepExecutor() : thread_([this] { loop(); }) {}

StepExecutor::~StepExecutor() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !has_job_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StepExecutor::launch(std::function<Status()> job) {
  DS_ASSERT(!in_flight_, "StepExecutor::launch with a job in flight");
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    has_job_ = true;
    done_ = false;
  }
  in_flight_ = true;
  cv_.notify_all();
}

Status StepExecutor::wait() {
  DS_ASSERT(in_flight_, "StepExecutor::wait without a launched job");
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  in_flight_ = false;
  return std::move(result_);
}

void StepExecutor::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return has_job_ || stop_; });
    if (!has_job_) return;  // stop_ and nothing left to run
    std::function<Status()> job = std::move(job_);
    lock.unlock();
    Status st = job();
    const int64_t t_done = now_ns();
    lock.lock();
    result_ = std::move(st);
    done_ns_ = t_done;
    has_job_ = false;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace ds
