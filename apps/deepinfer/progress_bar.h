// A one-line progress bar on stderr for long CLI work (bench serve, eval, make-model). Drawn only
// when stderr is a terminal, so logs and CI output stay clean; redrawn at most ten times a second.
// Thread-safe: workers call advance() as they finish items.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ds::cli {

class ProgressBar {
 public:
  // `enabled` defaults to whether stderr is a terminal.
  ProgressBar(std::string label, int64_t total);
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar();  // finishes the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void advance(int64_t n = 1, const std::string& note = {});
  bool enabled() const { return enabled_; }

 private:
  void draw(bool force);
  std::string label_;
  int64_t total_;
  bool enabled_;
  std::mutex mu_;
  int64_t done_ = 0;
  std::string note_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace ds::cli
