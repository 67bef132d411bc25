// Timing for the benches (STYLE habit 14): warm-up runs first, then the median of N timed runs.
// Only wall-clock time is measured; results go to the console, never to test assertions.
#pragma once

#include <algorithm>
#include <vector>

#include "base/clock.h"

namespace ds::bench {

struct RunStats {
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int n_runs = 0;
};

// Median of the values (the mean of the two middle ones for an even count); 0 when empty.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// Calls fn() n_warmup times untimed, then n_runs times, timing each call on its own.
template <class Fn>
RunStats time_runs(int n_warmup, int n_runs, Fn&& fn) {
  for (int i = 0; i < n_warmup; ++i) fn();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(n_runs));
  for (int i = 0; i < n_runs; ++i) {
    const double t0 = now_seconds();
    fn();
    seconds.push_back(now_seconds() - t0);
  }
  RunStats s;
  s.n_runs = n_runs;
  if (seconds.empty()) return s;
  s.median_s = median_of(seconds);
  s.min_s = *std::min_element(seconds.begin(), seconds.end());
  s.max_s = *std::max_element(seconds.begin(), seconds.end());
  return s;
}

// Like time_runs, but stops early once at least min_runs timed calls have together taken
// budget_s seconds (never more than max_runs): bounds the cost of slow cases (large GEMMs on a
// busy host) while fast cases still get max_runs samples.
template <class Fn>
RunStats time_runs_budget(int n_warmup, int min_runs, int max_runs, double budget_s, Fn&& fn) {
  for (int i = 0; i < n_warmup; ++i) fn();
  std::vector<double> seconds;
  double total_s = 0;
  for (int i = 0; i < max_runs; ++i) {
    if (i >= min_runs && total_s >= budget_s) break;
    const double t0 = now_seconds();
    fn();
    seconds.push_back(now_seconds() - t0);
    total_s += seconds.back();
  }
  RunStats s;
  s.n_runs = static_cast<int>(seconds.size());
  if (seconds.empty()) return s;
  s.median_s = median_of(seconds);
  s.min_s = *std::min_element(seconds.begin(), seconds.end());
  s.max_s = *std::max_element(seconds.begin(), seconds.end());
  return s;
}

}  // namespace ds::bench
