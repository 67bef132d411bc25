// The router's own /metrics, per worker (label `worker` = its URL) under a `deepinfer_router:` prefix:
// in flight, reported running/waiting and KV usage, health, requests, errors, retries, decisions per
// policy and reason, estimated prefix-hit tokens, and the time one routing decision takes.
#pragma once

#include <string>

#include "http/metrics_registry.h"

namespace ds::cluster {

class WorkerPool;

class RouterMetrics {
 public:
  RouterMetrics(server::MetricsRegistry& registry, const WorkerPool& pool);

  server::MetricFamily<server::Counter>& requests;              // {worker}
  server::MetricFamily<server::Counter>& errors;                // {worker}: connect/read failures, 5xx
  server::MetricFamily<server::Counter>& decisions;             // {policy, reason, worker}
  server::MetricFamily<server::Counter>& estimated_hit_tokens;  // {worker}
  server::MetricFamily<server::Counter>& prompt_tokens;         // {worker}: tokens the router rendered
  server::MetricFamily<server::Counter>& kv_event_batches;      // {worker}: batches applied
  server::MetricFamily<server::Counter>& kv_event_blocks;       // {worker, change}: stored, removed, dropped
  server::MetricFamily<server::Counter>& kv_event_resets;       // {worker, reason}: gap, restart, all_cleared
  server::MetricFamily<server::Counter>& kv_event_errors;       // {worker}: undecodable messages
  server::MetricFamily<server::Counter>& kv_event_replays;      // {worker, outcome}: filled, partial, failed
  server::MetricFamily<server::Gauge>& index_blocks;            // {worker}: blocks in its prefix index
  server::MetricFamily<server::Counter>& connections;           // {event}: reused, opened, dropped
  server::Counter& retries;
  server::Counter& no_worker;
  server::Histogram& decision_seconds;

 private:
  server::MetricFamily<server::Gauge>& in_flight_;
  server::MetricFamily<server::Gauge>& healthy_;
  server::MetricFamily<server::Gauge>& running_;
  server::MetricFamily<server::Gauge>& waiting_;
  server::MetricFamily<server::Gauge>& kv_usage_;
};

}  // namespace ds::cluster
