// RequestStream: the blocking view of one request's events for simple callers (examples, offline
// batch, tests). The engine delivers events through an EventSink on its own thread; the stream's
// sink only appends to a queue, so it never blocks the engine.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace ds {

// Called on the engine thread, once per event, the last one with finished == true. Must not block;
// it may call submit() and cancel(), never shutdown() or the engine's destructor (they join it).
using EventSink = std::function<void(TokenEvent&& event)>;

class RequestStream {
 public:
  RequestStream();

  // A sink that feeds this stream; hand it to Engine::submit(). The stream may be moved or
  // destroyed before the request finishes: the queue is shared with the sink.
  EventSink sink() const;

  // Blocks until the next event arrives; std::nullopt once the final event has been returned.
  std::optional<TokenEvent> next();
  // Same, but gives up at `until` (std::nullopt and !finished() means timed out).
  std::optional<TokenEvent> next_until(SteadyTime until);
  bool finished() const;

  // Reads every event to the end and merges them: tokens, text and logprobs concatenated, the
  // final event's reason, error, usage and timings.
  TokenEvent collect();

 private:
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<TokenEvent> events;  // guarded by mu
    bool final_queued = false;      // guarded by mu
  };
  std::shared_ptr<Queue> queue_;
  bool final_returned_ = false;
};

}  // namespace ds
