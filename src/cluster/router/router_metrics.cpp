#include "cluster/router/router_metrics.h"

#include "cluster/router/worker_pool.h"

namespace ds::cluster {

RouterMetrics::RouterMetrics(server::MetricsRegistry& r, const WorkerPool& pool)
    : requests(r.counter_family("deepinfer_router:requests_total", "Requests sent to each worker (attempts)",
                                {"worker"})),
      errors(r.counter_family(
          "deepinfer_router:worker_errors_total",
          "Failed attempts per worker (connect, read, 5xx, 429/503 before the first byte)", {"worker"})),
      decisions(r.counter_family("deepinfer_router:decisions_total", "Routing decisions by policy and reason",
                                 {"policy", "reason", "worker"})),
      estimated_hit_tokens(
          r.counter_family("deepinfer_router:estimated_hit_tokens_total",
                           "Prompt tokens the prefix index expected the worker to have cached", {"worker"})),
      prompt_tokens(r.counter_family("deepinfer_router:prompt_tokens_total",
                                     "Prompt tokens routed to each worker", {"worker"})),
      kv_event_batches(r.counter_family("deepinfer_router:kv_event_batches_total",
                                        "KV event batches applied from each worker's stream", {"worker"})),
      kv_event_blocks(
          r.counter_family("deepinfer_router:kv_event_blocks_total",
                           "Blocks from KV events: stored, removed, dropped (unknown parent or block size)",
                           {"worker", "change"})),
      kv_event_resets(r.counter_family(
          "deepinfer_router:kv_event_resets_total",
          "Times a worker's index was forgotten: missed batches (gap), publisher restart, AllBlocksCleared",
          {"worker", "reason"})),
      kv_event_errors(r.counter_family("deepinfer_router:kv_event_errors_total",
                                       "KV event messages that did not decode", {"worker"})),
      kv_event_replays(r.counter_family(
          "deepinfer_router:kv_event_replays_total",
          "Replay requests for missed or earlier KV event batches: filled (all of them came), partial "
          "(some were gone: the worker was forgotten where it had a gap), failed (no answer)",
          {"worker", "outcome"})),
      index_blocks(r.gauge_family("deepinfer_router:index_blocks",
                                  "Blocks in each worker's prefix index (events or routing history)",
                                  {"worker"})),
      connections(r.counter_family(
          "deepinfer_router:worker_connections_total",
          "Connections to workers: reused from the keep-alive pool, opened, dropped idle", {"event"})),
      retries(r.counter("deepinfer_router:retries_total",
                        "Attempts retried on another worker before the first byte")),
      no_worker(
          r.counter("deepinfer_router:no_worker_total", "Requests refused because no worker was usable")),
      decision_seconds(r.histogram("deepinfer_router:decision_seconds",
                                   "Time to render, tokenize and pick a worker",
                                   {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1})),
      in_flight_(
          r.gauge_family("deepinfer_router:worker_in_flight", "Requests open on each worker", {"worker"})),
      healthy_(r.gauge_family("deepinfer_router:worker_healthy", "1 while the worker is usable", {"worker"})),
      running_(r.gauge_family("deepinfer_router:worker_running", "Running requests the worker reports",
                              {"worker"})),
      waiting_(r.gauge_family("deepinfer_router:worker_waiting",
                              "Queued requests the worker reports (queue depth)", {"worker"})),
      kv_usage_(r.gauge_family("deepinfer_router:worker_kv_usage",
                               "KV cache usage fraction the worker reports", {"worker"})) {
  r.add_collector([this, &pool] {
    for (const auto& w : pool.all()) {
      const std::string& url = w->address.url;
      in_flight_.with({url}).set(static_cast<double>(w->in_flight.load()));
      healthy_.with({url}).set(w->usable() ? 1.0 : 0.0);
      running_.with({url}).set(static_cast<double>(w->reported_running.load()));
      waiting_.with({url}).set(static_cast<double>(w->reported_waiting.load()));
      kv_usage_.with({url}).set(w->reported_kv_usage.load());
    }
  });
}

}  // namespace ds::cluster
