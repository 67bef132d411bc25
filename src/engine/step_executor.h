// StepExecutor: one thread that runs a step's forward pass while the engine thread plans the next
// step and emits the previous step's events (async scheduling). The model's own thread pool does
// the math; this thread only calls into it, so there is never more than one forward at a time.
//
// Thread contract: launch() and wait() are called by one thread (the engine's), alternately.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "base/status.h"

namespace ds {

class StepExecutor {
 public:
  StepExecutor();
  ~StepExecutor();  // joins the thread (waits for a launched job first)
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Starts `job` on the executor thread. Precondition: no job in flight (wait() returned).
  void launch(std::function<Status()> job);
  // Blocks until the launched job returns; its Status. Precondition: a job was launched.
  Status wait();
  bool in_flight() const { return in_flight_; }
  // steady-clock ns at which the last job returned (set before wait() wakes up).
  int64_t last_done_ns() const { return done_ns_; }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::function<Status()> job_;
  bool has_job_ = false;
  bool done_ = false;
  bool stop_ = false;
  Status result_;
  int64_t done_ns_ = 0;
  // Engine thread only.
  bool in_flight_ = false;
  std::thread thread_;  // last: started after every member above is constructed
};

}  // namespace ds
