// RequestRouter: one routing decision. From the request's prompt blocks and session key and the
// pool's current state it builds the policy's view (eligible workers, load, prefix matches), asks the
// policy, and records the decision: the decision counters move and, for a worker without a KV event
// stream, its prefix index learns the prompt's blocks (it will hold them once it served the request:
// routing history). A worker with an event stream is indexed from its events only (kv_event_index.h),
// so evictions count and nothing is assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cluster/router/kv_event_index.h"
#include "cluster/router/policy.h"
#include "cluster/router/prefix_index.h"
#include "cluster/router/router_metrics.h"
#include "cluster/router/worker_pool.h"

namespace ds::cluster {

struct RoutingConfig {
  PolicyKind policy = PolicyKind::cache_aware;
  CacheAwareThresholds thresholds;
  int block_size_tokens = 64;                    // the workers' KV block size
  size_t max_index_blocks_per_worker = 1 << 16;  // ~4M tokens of prefixes per worker at 64 tokens a block
  uint64_t seed = 0;                             // random policy
};

struct RoutePick {
  int worker = -1;  // -1: none usable
  size_t matched_blocks = 0;
  const char* reason = "none";
};

class RequestRouter {
 public:
  RequestRouter(WorkerPool& pool, RouterMetrics& metrics, const RoutingConfig& config);

  // `excluded[i]`: worker i was already tried for this request. `record` false: a request that is not a
  // generation (/v1/models) leaves the index and the decision counters alone. Thread-safe.
  RoutePick pick(std::span<const uint64_t> prompt_blocks, const std::optional<std::string>& session,
                 const std::vector<bool>& excluded, size_t n_prompt_tokens, bool record = true);

  const RoutingConfig& config() const { return config_; }
  PrefixIndex& prefix_index() { return index_; }
  // The workers' KV events (BlockStored / BlockRemoved / AllBlocksCleared) into the prefix index.
  KvEventIndex& kv_events() { return kv_events_; }
  // The worker's cache is gone or unknown (it restarted, was down, or its events were missed).
  void forget_worker(size_t worker) { kv_events_.clear(worker); }

 private:
  WorkerPool& pool_;
  RouterMetrics& metrics_;
  const RoutingConfig config_;
  std::unique_ptr<Policy> policy_;
  PrefixIndex index_;
  KvEventIndex kv_events_;  // after index_: writes into it
};

}  // namespace ds::cluster
