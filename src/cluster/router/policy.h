// Routing policies: pick one worker for a request from a snapshot of the workers (eligible or not,
// their load, how much of the prompt each one probably has cached).
//
// cache_aware is SGLang's policy (serving-anchors §4, defaults from its router):
//   1. if the load is imbalanced (max - min > balance_abs_threshold AND max > min * balance_rel_threshold)
//      take the least loaded worker: the cache cannot pay for a long queue;
//   2. else if the best prefix match covers more than cache_threshold of the prompt's blocks, take it;
//   3. else, when the request names a session (prompt_cache_key or user), consistent hashing with
//      bounded load (rendezvous hashing; a worker above 1.25x the mean load is skipped), so a
//      session's next turn finds its cache; without a session, the least loaded worker (ties: the
//      smallest index, the one with the most room).
// least_load takes the minimum load; round_robin cycles; random draws uniformly. All skip workers
// that are not eligible (unhealthy, removed, already tried for this request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::cluster {

enum class PolicyKind { cache_aware, least_load, round_robin, random };

Result<PolicyKind> parse_policy(std::string_view name);
const char* policy_name(PolicyKind kind);

struct CacheAwareThresholds {
  double cache_threshold = 0.5;
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
  double session_load_bound = 1.25;  // bounded-load factor c of consistent hashing
};

struct WorkerView {
  bool eligible = false;
  int64_t load = 0;            // requests in flight or queued on it
  size_t matched_blocks = 0;   // leading prompt blocks it probably holds
  size_t index_blocks = 0;     // blocks the prefix index holds for it (its estimated cache size)
  uint64_t identity_hash = 0;  // stable per worker (its URL), for consistent hashing
};

struct RouteInput {
  std::vector<WorkerView> workers;
  size_t n_prompt_blocks = 0;
  std::optional<uint64_t> session_hash;  // prompt_cache_key or user
};

struct Decision {
  int worker = -1;              // -1: no eligible worker
  const char* reason = "none";  // "imbalanced", "cache_hit", "session", "least_load", "round_robin", ...
};

class Policy {
 public:
  virtual ~Policy() = default;
  // Thread-safe.
  virtual Decision choose(const RouteInput& input) = 0;
};

std::unique_ptr<Policy> make_policy(PolicyKind kind, const CacheAwareThresholds& thresholds, uint64_t seed);

// Rendezvous hashing with bounded load: the eligible worker ranking highest for `key` whose load
// stays within ceil(c * (total + 1) / n_eligible); -1 when none is eligible.
int consistent_pick(const std::vector<WorkerView>& workers, uint64_t key, double c);

}  // namespace ds::cluster
