// Per-tier KV cache metrics for `deepinfer serve`'s /metrics (docs/kvcache.md, Tiers):
// deepinfer:kv_tier_*{tier="disk"|"redis"} read from the engine at scrape time.
#pragma once

#include "engine/engine.h"
#include "http/metrics_registry.h"

namespace ds::cli {

void add_kv_tier_metrics(server::MetricsRegistry& registry, const Engine& engine);

}  // namespace ds::cli
