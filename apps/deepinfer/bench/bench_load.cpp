#include "bench/bench_load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

namespace ds::bench {

std::vector<double> arrival_times(int n, const LoadOptions& load) {
  std::vector<double> at(static_cast<size_t>(n), 0.0);
  if (std::isinf(load.request_rate)) return at;
  std::mt19937_64 rng(load.seed);
  // Gamma intervals with mean 1/rate: shape = burstiness, scale = 1 / (rate * burstiness).
  std::gamma_distribution<double> gap(load.burstiness, 1.0 / (load.request_rate * load.burstiness));
  double t = 0;
  for (int i = 0; i < n; ++i) {
    at[static_cast<size_t>(i)] = t;
    t += gap(rng);
  }
  return at;
}

LoadRun run_load(const client::BaseUrl& base, const RequestSpec& spec,
                 const std::vector<BenchPrompt>& prompts, const LoadOptions& load,
                 const std::function<void(const RequestRecord&)>& on_done) {
  const int n = static_cast<int>(prompts.size());
  const std::vector<double> arrivals = arrival_times(n, load);
  const int limit = load.max_concurrency > 0 ? load.max_concurrency : kMaxClientThreads;
  const int n_threads = std::min({n, limit, kMaxClientThreads});
  LoadRun run;
  run.records.resize(prompts.size());
  std::atomic<int> next{0};
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> clients;
    clients.reserve(static_cast<size_t>(n_threads));
    for (int t = 0; t < n_threads; ++t) {
      clients.emplace_back([&] {
        for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
          const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(arrivals[static_cast<size_t>(i)]));
          std::this_thread::sleep_until(due);
          RequestRecord rec = run_request(base, spec, prompts[static_cast<size_t>(i)], start);
          if (on_done) on_done(rec);
          run.records[static_cast<size_t>(i)] = std::move(rec);
        }
      });
    }
  }  // joins
  run.duration_s = 0;
  for (const RequestRecord& r : run.records) run.duration_s = std::max(run.duration_s, r.start_s + r.e2e_s);
  return run;
}

}  // namespace ds::bench
