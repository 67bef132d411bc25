// The serving metrics /metrics exports, named like vLLM's under a `deepinfer:` prefix so existing
// dashboards and gateway scorers can read them with a prefix swap (serving-anchors §1.1, §8).
// Counters carry the Prometheus `_total` suffix in their exposed name.
#pragma once

#include <string>

#include "http/metrics_registry.h"

namespace ds::server {

// Engine-wide numbers read at scrape time (mirrors of the engine's own counters; the app fills this from
// Engine::stats() in a collector so the server does not depend on the engine's struct layout).
struct EngineGaugeSample {
  double n_requests_running = 0;
  double n_requests_waiting = 0;
  double prefill_tokens_pending = 0;  // prompt tokens accepted, not prefilled yet
  double kv_cache_usage = 0;          // fraction in [0, 1]
  double prefix_cache_query_tokens = 0;
  double prefix_cache_hit_tokens = 0;
  double prompt_tokens = 0;
  double generation_tokens = 0;
};

class ServingMetrics {
 public:
  explicit ServingMetrics(MetricsRegistry& registry);

  void set_engine_sample(const EngineGaugeSample& s);
  // One finished request: its finish reason ("stop", "length", "abort", ...) and latencies in seconds.
  void record_request_finished(const std::string& finish_reason) {
    request_success_.with({finish_reason}).inc();
  }
  // One HTTP exchange (route = the registered path, "unmatched" when none matched).
  void record_http(const std::string& route, const std::string& method, int http_status, double duration_s);

  Gauge& num_requests_running;
  Gauge& num_requests_waiting;
  Gauge& num_prefill_tokens_pending;
  Gauge& kv_cache_usage_perc;
  Counter& prefix_cache_queries;
  Counter& prefix_cache_hits;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Histogram& time_to_first_token_seconds;
  Histogram& inter_token_latency_seconds;
  Histogram& e2e_request_latency_seconds;
  Histogram& request_queue_time_seconds;

 private:
  MetricFamily<Counter>& request_success_;
  MetricFamily<Counter>& http_requests_;
  MetricFamily<Histogram>& http_request_duration_;
};

}  // namespace ds::server
