// Expert-parallel metrics for `deepinfer serve --expert-parallel`'s /metrics, per rank
// (docs/expert-parallel.md): rows each local expert computed, the local imbalance, all-to-all bytes
// and time, idle steps, live EPLB's moves. Read from the EpStepRunner at scrape time.
#pragma once

#include "http/metrics_registry.h"
#include "parallel/ep_step_runner.h"

namespace ds::cli {

// The rows of the experts this rank holds at scrape time are reported, zeros included.
void add_ep_metrics(server::MetricsRegistry& registry, const EpStepRunner& runner, int rank, int n_ranks);

}  // namespace ds::cli
