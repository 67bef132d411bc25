#include "progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace ds::cli {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : ProgressBar(std::move(label), total, isatty(2) != 0) {}

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  last_draw_ = start_ - std::chrono::seconds(1);
  if (enabled_) draw(true);
}

ProgressBar::~ProgressBar() {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  draw(true);
  std::fputc('\n', stderr);
}

void ProgressBar::advance(int64_t n, const std::string& note) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  done_ += n;
  if (!note.empty()) note_ = note;
  draw(done_ >= total_);
}

void ProgressBar::draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth + 0.5);
  std::string bar(static_cast<size_t>(filled > kWidth ? kWidth : filled), '#');
  bar.resize(kWidth, ' ');
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\x1b[2K%s [%s] %lld/%lld %.1fs %s", label_.c_str(), bar.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), elapsed_s, note_.c_str());
  std::fflush(stderr);
}

}  // namespace ds::cli
