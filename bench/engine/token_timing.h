// Per-request token timing for the engine benches (spec_decode_bench, grammar_decode_bench): when a
// request's first and last tokens arrived and how many there were, fed by its event sink.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace ds::bench {

class TokenTiming {
 public:
  // The sink to submit the request with; the TokenTiming must outlive the request.
  EventSink sink() {
    return [this](TokenEvent&& e) {
      std::lock_guard<std::mutex> lock(mu_);
      const SteadyTime now = std::chrono::steady_clock::now();
      if (!e.tokens.empty()) {
        if (n_tokens_ == 0) first_ = now;
        last_ = now;
        n_tokens_ += static_cast<int64_t>(e.tokens.size());
      }
      if (e.finished) done_ = true;
    };
  }

  // Polls until the request's last event (the benches' requests always end).
  void wait() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (done_) return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  int64_t n_tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return n_tokens_;
  }

  // Decode speed as its user sees it: tokens after the first over the time from first to last.
  double per_user_tok_s() const {
    std::lock_guard<std::mutex> lock(mu_);
    const double s = std::chrono::duration<double>(last_ - first_).count();
    return s > 0 ? static_cast<double>(n_tokens_ - 1) / s : 0.0;
  }

 private:
  mutable std::mutex mu_;
  SteadyTime first_{}, last_{};
  int64_t n_tokens_ = 0;
  bool done_ = false;
};

}  // namespace ds::bench
