// sampling_bench: microseconds per sampled token at vocab 129,280 (DeepSeek-V3) for greedy,
// temperature, top-p 0.9, top-k 50, min-p, penalties and 20 logprobs; the fast Sampler against the
// full-sort reference_sample as the baseline.
//
// Logits: a fixed-seed, model-like row — a Gumbel-distributed body (scale 1.5) so the softmax has a
// long tail, plus 40 "plausible" tokens lifted by 8-14 nats, like a language model's confident
// next-token row; a different row per run (seeds seed..seed+runs-1) so the draw walks different
// buckets. Each configuration warms up on 3 rows, then reports the median (and min/max) over
// `runs` rows of the thread CPU time of one sample() call, and the median wall time. The roofline
// unit is one pass over the row: the measured time of a vectorised max over the 517 KB row (the
// least any sampler must do); "passes" = fast time / that.
//
// usage: sampling_bench [--runs N] [--seed S] [--no-reference]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "sampling/penalty_state.h"
#include "sampling/reference_sampler.h"
#include "sampling/sampler.h"
#include "sampling/sampling_rule.h"

namespace {

constexpr size_t kVocab = 129280;

std::vector<float> model_like_logits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(1e-12, 1.0);
  std::vector<float> row(kVocab);
  for (float& l : row) l = static_cast<float>(-1.5 * std::log(-std::log(u(rng))));  // Gumbel body
  std::uniform_int_distribution<size_t> id(0, kVocab - 1);
  std::uniform_real_distribution<float> lift(8.0f, 14.0f);
  for (int i = 0; i < 40; ++i) row[id(rng)] += lift(rng);
  return row;
}

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

double wall_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Stats {
  double median, min, max;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

struct Config {
  const char* name;
  ds::SamplingParams params;
  bool penalties;
};

}  // namespace

int main(int argc, char** argv) {
  int runs = 51;
  uint64_t seed = 0;
  bool with_reference = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--no-reference")) {
      with_reference = false;  // for profiling the fast path alone
    } else {
      std::fprintf(stderr, "usage: sampling_bench [--runs N] [--seed S] [--no-reference]\n");
      return 2;
    }
  }
  constexpr int kWarmup = 3;
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < runs + kWarmup; ++r) rows.push_back(model_like_logits(seed + static_cast<uint64_t>(r)));

  // A request 2,000 tokens in: 1,500 prompt tokens and 500 output tokens from a 30k-id range.
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> id(0, 30000);
  std::vector<int32_t> prompt(1500), output(500);
  for (int32_t& t : prompt) t = id(rng);
  for (int32_t& t : output) t = id(rng);
  const ds::PenaltyState history = ds::PenaltyState::from_tokens(prompt, output);
  const ds::PenaltyState none;

  std::vector<Config> configs;
  {
    ds::SamplingParams p;
    configs.push_back({"greedy", p, false});
    p.temperature = 0.8f;
    configs.push_back({"temperature 0.8", p, false});
    ds::SamplingParams q = p;
    q.top_p = 0.9f;
    configs.push_back({"top-p 0.9", q, false});
    q = p;
    q.top_k = 50;
    configs.push_back({"top-k 50", q, false});
    q = p;
    q.min_p = 0.05f;
    configs.push_back({"min-p 0.05", q, false});
    q = p;
    q.top_p = 0.95f;
    q.repetition_penalty = 1.1f;
    q.presence_penalty = 0.5f;
    q.frequency_penalty = 0.3f;
    configs.push_back({"penalties + top-p 0.95", q, true});
    q = p;
    q.logprobs = true;
    q.top_logprobs = 20;
    configs.push_back({"logprobs 20 (raw)", q, false});
    q.logprobs_mode = ds::LogprobsMode::processed;
    configs.push_back({"logprobs 20 (processed)", q, false});
    ds::SamplingParams g;
    g.logprobs = true;
    g.top_logprobs = 20;
    configs.push_back({"greedy + logprobs 20", g, false});
  }

  // Baseline: one vectorised read pass over a row.
  std::vector<double> pass_cpu;
  float sink = 0.0f;
  for (int r = 0; r < runs + kWarmup; ++r) {
    const double c0 = thread_cpu_us();
    sink += ds::sampling_rule::max_value(rows[static_cast<size_t>(r)]);
    if (r >= kWarmup) pass_cpu.push_back(thread_cpu_us() - c0);
  }
  const double one_pass_us = stats(pass_cpu).median;

  std::printf("sampling_bench: vocab %zu, %d runs (median [min, max]) after %d warm-up rows, seed %llu\n",
              kVocab, runs, kWarmup, static_cast<unsigned long long>(seed));
  std::printf("one read pass over the row (max): %.1f us cpu\n", one_pass_us);
  std::printf("%-26s %22s %10s %8s %18s %9s\n", "config", "fast cpu us/token", "fast wall", "passes",
              "reference cpu us", "speedup");
  ds::Sampler sampler;
  int64_t checksum = 0;
  for (const Config& c : configs) {
    const ds::PenaltyState& st = c.penalties ? history : none;
    std::vector<double> cpu, wall, ref_cpu;
    for (int r = 0; r < runs + kWarmup; ++r) {
      const std::vector<float>& row = rows[static_cast<size_t>(r)];
      const double c0 = thread_cpu_us(), w0 = wall_us();
      const ds::SampleResult res = sampler.sample(row, c.params, st, static_cast<uint64_t>(r), 0);
      const double c1 = thread_cpu_us(), w1 = wall_us();
      checksum += res.token_id;
      if (r < kWarmup) continue;
      cpu.push_back(c1 - c0);
      wall.push_back(w1 - w0);
      if (with_reference && r < kWarmup + 5) {  // the reference is slow: 5 rows are enough for its median
        const double r0 = thread_cpu_us();
        const ds::SampleResult ref = ds::reference_sample(row, c.params, st, static_cast<uint64_t>(r), 0);
        ref_cpu.push_back(thread_cpu_us() - r0);
        if (ref.token_id != res.token_id) {
          std::fprintf(stderr, "%s: fast %d != reference %d at run %d\n", c.name, res.token_id, ref.token_id,
                       r);
          return 1;
        }
      }
    }
    if (ref_cpu.empty()) ref_cpu.push_back(NAN);
    const Stats s = stats(cpu), w = stats(wall), rf = stats(ref_cpu);
    char range[64];
    std::snprintf(range, sizeof range, "%.0f [%.0f, %.0f]", s.median, s.min, s.max);
    std::printf("%-26s %22s %10.0f %8.1f %18.0f %8.1fx\n", c.name, range, w.median, s.median / one_pass_us,
                rf.median, rf.median / s.median);
  }
  std::printf("(checksum %lld, %g)\n", static_cast<long long>(checksum), static_cast<double>(sink));
  return 0;
}
