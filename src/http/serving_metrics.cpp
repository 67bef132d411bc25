#include "http/serving_metrics.h"

#include <vector>

namespace ds::server {
namespace {

// Bucket bounds follow vLLM's (docs/design/metrics.md) so histograms compare across engines, trimmed
// at the short end where a CPU engine never lands.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> http_buckets() { return {0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0}; }

}  // namespace

ServingMetrics::ServingMetrics(MetricsRegistry& r)
    : num_requests_running(r.gauge("deepinfer:num_requests_running", "Requests in model execution batches.")),
      num_requests_waiting(r.gauge("deepinfer:num_requests_waiting", "Requests waiting to be processed.")),
      num_prefill_tokens_pending(
          r.gauge("deepinfer:num_prefill_tokens_pending",
                  "Prompt tokens accepted and not yet prefilled (queued and in progress).")),
      kv_cache_usage_perc(
          r.gauge("deepinfer:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")),
      prefix_cache_queries(r.counter("deepinfer:prefix_cache_queries_total",
                                     "Prefix cache queries, in number of queried tokens.")),
      prefix_cache_hits(
          r.counter("deepinfer:prefix_cache_hits_total", "Prefix cache hits, in number of cached tokens.")),
      prompt_tokens(r.counter("deepinfer:prompt_tokens_total", "Number of prefill tokens processed.")),
      generation_tokens(
          r.counter("deepinfer:generation_tokens_total", "Number of generation tokens processed.")),
      time_to_first_token_seconds(r.histogram("deepinfer:time_to_first_token_seconds",
                                              "Histogram of time to first token in seconds.",
                                              ttft_buckets())),
      inter_token_latency_seconds(r.histogram("deepinfer:inter_token_latency_seconds",
                                              "Histogram of inter-token latency in seconds.", itl_buckets())),
      e2e_request_latency_seconds(r.histogram("deepinfer:e2e_request_latency_seconds",
                                              "Histogram of end-to-end request latency in seconds.",
                                              request_latency_buckets())),
      request_queue_time_seconds(r.histogram("deepinfer:request_queue_time_seconds",
                                             "Histogram of time spent waiting in the queue in seconds.",
                                             request_latency_buckets())),
      request_success_(r.counter_family("deepinfer:request_success_total",
                                        "Count of successfully processed requests.", {"finished_reason"})),
      http_requests_(r.counter_family("deepinfer:http_requests_total",
                                      "HTTP requests by route, method and status.",
                                      {"route", "method", "status"})),
      http_request_duration_(r.histogram_family("deepinfer:http_request_duration_seconds",
                                                "HTTP request duration in seconds, by route.", {"route"},
                                                http_buckets())) {}

void ServingMetrics::set_engine_sample(const EngineGaugeSample& s) {
  num_requests_running.set(s.n_requests_running);
  num_requests_waiting.set(s.n_requests_waiting);
  num_prefill_tokens_pending.set(s.prefill_tokens_pending);
  kv_cache_usage_perc.set(s.kv_cache_usage);
  prefix_cache_queries.set_total(s.prefix_cache_query_tokens);
  prefix_cache_hits.set_total(s.prefix_cache_hit_tokens);
  prompt_tokens.set_total(s.prompt_tokens);
  generation_tokens.set_total(s.generation_tokens);
}

void ServingMetrics::record_http(const std::string& route, const std::string& method, int http_status,
                                 double duration_s) {
  http_requests_.with({route, method, std::to_string(http_status)}).inc();
  http_request_duration_.with({route}).observe(duration_s);
}

}  // namespace ds::server
