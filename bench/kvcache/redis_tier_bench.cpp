// redis_tier_bench: what pipelining buys the Redis tier (docs/kvcache.md, Redis tier). Against a real
// redis-server it starts on a free loopback port, it stores N entries of B bytes one write() at a
// time and in write_batch() groups of 16 (the tier store's batch), and looks them up with one
// contains() per key and with contains_each(); it prints entries/s and the ratio of batched to one
// at a time in the same run. A loopback copy rate (memcpy of the same bytes) is the ceiling.
//   redis_tier_bench [--entries 512] [--entry-kib 448] [--runs 3]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "kvcache/redis_tier.h"
#include "kvcache/testing/redis_server.h"

namespace {

using namespace ds;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<TierEntry> make_entries(int n, size_t bytes, uint64_t first_key) {
  std::vector<TierEntry> out(static_cast<size_t>(n));
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    TierEntry& e = out[static_cast<size_t>(i)];
    e.key = first_key + static_cast<uint64_t>(i);
    e.prev_key = e.key - 1;
    e.tokens.assign(64, i);
    e.bytes.resize(bytes);
    for (size_t k = 0; k < bytes; k += 64) e.bytes[k] = static_cast<std::byte>(rng());
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int n_entries = 512;
  double entry_kib = 448;  // a V3 bench-preset block of 64 tokens (61 layers x 576 f32 latents)
  int runs = 3;
  CLI::App app{"Redis tier: one request at a time vs pipelined batches"};
  app.add_option("--entries", n_entries, "Entries per run")->capture_default_str();
  app.add_option("--entry-kib", entry_kib, "KiB per entry")->capture_default_str();
  app.add_option("--runs", runs, "Runs (median)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  testing::RedisServer redis;
  if (!redis.ok()) {
    std::fprintf(stderr, "redis_tier_bench: redis-server did not start\n");
    return 1;
  }
  Result<std::unique_ptr<RedisTier>> opened =
      RedisTier::open({.url = redis.url(), .namespace_id = 1, .ttl_s = 600, .io_timeout_ms = 5000});
  if (!opened.ok()) {
    std::fprintf(stderr, "redis_tier_bench: %s\n", opened.status().to_string().c_str());
    return 1;
  }
  RedisTier& tier = **opened;
  const auto bytes = static_cast<size_t>(entry_kib * 1024);
  std::vector<double> one_w, batch_w, one_r, batch_r, copy;
  for (int run = 0; run < runs; ++run) {
    const uint64_t base = 1'000'000ull * static_cast<uint64_t>(run + 1);
    std::vector<TierEntry> a = make_entries(n_entries, bytes, base),
                           b = make_entries(n_entries, bytes, base + 500'000);
    auto t0 = std::chrono::steady_clock::now();
    for (const TierEntry& e : a) (void)tier.write(e);
    one_w.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < b.size(); i += 16) {
      std::vector<const TierEntry*> batch;
      for (size_t k = i; k < std::min(b.size(), i + 16); ++k) batch.push_back(&b[k]);
      (void)tier.write_batch(batch);
    }
    batch_w.push_back(seconds_since(t0));
    std::vector<uint64_t> keys;
    for (const TierEntry& e : a) keys.push_back(e.key);
    t0 = std::chrono::steady_clock::now();
    int64_t held = 0;
    for (const uint64_t k : keys) held += tier.contains(k) ? 1 : 0;
    one_r.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    int64_t held_batched = 0;
    for (size_t i = 0; i < keys.size(); i += 16) {
      const std::vector<bool> h =
          tier.contains_each(std::span(keys).subspan(i, std::min<size_t>(16, keys.size() - i)));
      held_batched += std::count(h.begin(), h.end(), true);
    }
    batch_r.push_back(seconds_since(t0));
    if (held != n_entries || held_batched != n_entries)
      std::fprintf(stderr, "redis_tier_bench: lookups found %lld / %lld of %d entries\n",
                   static_cast<long long>(held), static_cast<long long>(held_batched), n_entries);
    std::vector<std::byte> dst(bytes);
    t0 = std::chrono::steady_clock::now();
    for (const TierEntry& e : a) std::memcpy(dst.data(), e.bytes.data(), bytes);
    copy.push_back(seconds_since(t0));
  }
  const double n = n_entries;
  const double gb = n * static_cast<double>(bytes) / 1e9;
  fmt::print("redis_tier_bench: {} entries of {:.0f} KiB over loopback, median of {} runs\n", n_entries,
             entry_kib, runs);
  fmt::print("{:>26} {:>12} {:>10} {:>10}\n", "case", "entries/s", "GB/s", "vs one");
  fmt::print("{:>26} {:>12.0f} {:>10.2f} {:>10}\n", "write, one at a time", n / median(one_w),
             gb / median(one_w), "1.00x");
  fmt::print("{:>26} {:>12.0f} {:>10.2f} {:>9.2f}x\n", "write_batch of 16", n / median(batch_w),
             gb / median(batch_w), median(one_w) / median(batch_w));
  fmt::print("{:>26} {:>12.0f} {:>10} {:>10}\n", "contains, one at a time", n / median(one_r), "-", "1.00x");
  fmt::print("{:>26} {:>12.0f} {:>10} {:>9.2f}x\n", "contains_each of 16", n / median(batch_r), "-",
             median(one_r) / median(batch_r));
  fmt::print("{:>26} {:>12} {:>10.2f} {:>10}\n", "memcpy (ceiling)", "-", gb / median(copy), "-");
  return 0;
}
