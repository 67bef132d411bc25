// The load pattern of a serving benchmark (vllm bench serve's): request i arrives at a time drawn
// from a gamma process (burstiness 1 = Poisson with `request_rate` per second; inf = all at once,
// seeded), and at most `max_concurrency` requests are in flight; an arrival that finds them all busy
// waits for the next free slot, in arrival order. One blocking client thread per slot.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "bench/bench_request.h"

namespace ds::bench {

struct LoadOptions {
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0: no limit (capped at kMaxClientThreads)
  uint64_t seed = 0;
};

inline constexpr int kMaxClientThreads = 1024;

// Arrival times in seconds from the start, non-decreasing, all 0 for an infinite rate.
std::vector<double> arrival_times(int n, const LoadOptions& load);

struct LoadRun {
  std::vector<RequestRecord> records;  // in prompt order
  double duration_s = 0;               // run start to the last answer
};

// Runs every prompt; `on_done` (may be empty) is called from a client thread after each request.
LoadRun run_load(const client::BaseUrl& base, const RequestSpec& spec,
                 const std::vector<BenchPrompt>& prompts, const LoadOptions& load,
                 const std::function<void(const RequestRecord&)>& on_done);

}  // namespace ds::bench
