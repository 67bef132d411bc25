#include "kv_tier_metrics.h"

#include <vector>

namespace ds::cli {

namespace {

void mirror(server::Histogram& h, const TierLatencyCounts& counts) {
  const std::vector<uint64_t> buckets(counts.counts.begin(), counts.counts.end());
  h.set_totals(buckets, static_cast<double>(counts.sum_ns) * 1e-9);
}

}  // namespace

void add_kv_tier_metrics(server::MetricsRegistry& registry, const Engine& engine) {
  using server::Counter;
  using server::MetricFamily;
  auto counter = [&](const char* name, const char* help) -> MetricFamily<Counter>& {
    return registry.counter_family(std::string("deepinfer:kv_tier_") + name, help, {"tier"});
  };
  auto* hits = &counter("hits_total", "Tier entries read and restored.");
  auto* misses = &counter("misses_total", "Tier reads of keys not held.");
  auto* corrupt = &counter("corrupt_total", "Tier entries that failed their checks (deleted).");
  auto* expired = &counter("expired_total", "Tier entries found past their TTL (deleted).");
  auto* evictions = &counter("evictions_total", "Tier entries dropped for capacity.");
  auto* errors = &counter("errors_total", "Tier I/O or connection errors (the tier was skipped).");
  auto* writes = &counter("writes_total", "Tier entries written.");
  auto* removed = &counter("removed_total", "Tier entries deleted by DELETE /v1/cache.");
  auto* read_bytes = &counter("read_bytes_total", "Bytes read from the tier.");
  auto* written_bytes = &counter("written_bytes_total", "Bytes written to the tier.");
  auto* read_seconds = &counter("read_seconds_total", "Time spent in tier reads.");
  auto* write_seconds = &counter("write_seconds_total", "Time spent in tier writes.");
  auto* entries =
      &registry.gauge_family("deepinfer:kv_tier_entries", "Entries the tier holds (SSD).", {"tier"});
  auto* stored =
      &registry.gauge_family("deepinfer:kv_tier_stored_bytes", "Bytes the tier holds (SSD).", {"tier"});
  const std::vector<double> bounds(kTierLatencyBoundsS.begin(), kTierLatencyBoundsS.end());
  auto* read_latency =
      &registry.histogram_family("deepinfer:kv_tier_read_latency_seconds",
                                 "Latency of tier reads that returned an entry.", {"tier"}, bounds);
  auto* write_latency =
      &registry.histogram_family("deepinfer:kv_tier_write_latency_seconds",
                                 "Latency of tier writes that stored an entry.", {"tier"}, bounds);
  Counter* restored = &registry.counter("deepinfer:kv_tier_restored_tokens_total",
                                        "Prompt tokens restored from the KV tiers into the pool.");
  Counter* dropped = &registry.counter("deepinfer:kv_tier_write_jobs_dropped_total",
                                       "KV tier write jobs dropped because the writer's queue was full.");
  // Pointers into the registry, which outlives the collector; the engine outlives the server.
  registry.add_collector([=, &engine] {
    for (const auto& [name, s] : engine.kv_tier_stats()) {
      hits->with({name}).set_total(static_cast<double>(s.n_hits));
      misses->with({name}).set_total(static_cast<double>(s.n_misses));
      corrupt->with({name}).set_total(static_cast<double>(s.n_corrupt));
      expired->with({name}).set_total(static_cast<double>(s.n_expired));
      evictions->with({name}).set_total(static_cast<double>(s.n_evictions));
      errors->with({name}).set_total(static_cast<double>(s.n_errors));
      writes->with({name}).set_total(static_cast<double>(s.n_writes));
      removed->with({name}).set_total(static_cast<double>(s.n_removed));
      read_bytes->with({name}).set_total(static_cast<double>(s.bytes_read));
      written_bytes->with({name}).set_total(static_cast<double>(s.bytes_written));
      read_seconds->with({name}).set_total(static_cast<double>(s.read_ns_total) * 1e-9);
      write_seconds->with({name}).set_total(static_cast<double>(s.write_ns_total) * 1e-9);
      entries->with({name}).set(static_cast<double>(s.n_entries));
      stored->with({name}).set(static_cast<double>(s.bytes_stored));
      mirror(read_latency->with({name}), s.read_latency);
      mirror(write_latency->with({name}), s.write_latency);
    }
    const EngineStats e = engine.stats();
    restored->set_total(static_cast<double>(e.kv_tier_restored_tokens));
    dropped->set_total(static_cast<double>(e.kv_tier_write_jobs_dropped));
  });
}

}  // namespace ds::cli
