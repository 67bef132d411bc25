// WaitingQueue: the scheduler's bounded admission queue, ordered by policy (docs/engine.md):
//   1. higher priority first;
//   2. within a priority, sequences preempted by recompute first, in their original admission order
//      (they were running and hold the oldest claim);
//   3. then new sequences: the tenant with the fewest tokens served (TenantShare) first, ties to the
//      tenant whose oldest sequence arrived first; FIFO within a tenant.
// Erase by id is O(log n) so expiry and cancellation of queued work is cheap.
//
// Not thread-safe: owned by the scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "engine/tenant_share.h"
#include "kvcache/kv_cache_manager.h"

namespace ds {

class WaitingQueue {
 public:
  // order: arrival order for a new sequence, first-admission order for a preempted one (resumed).
  // Precondition: seq_id is not queued.
  void push(SeqId seq_id, int32_t priority, const std::string& tenant, uint64_t order, bool resumed);

  // Removes a queued sequence; false when it is not queued.
  bool erase(SeqId seq_id);

  // The sequence the policy admits next, or nullopt when empty.
  std::optional<SeqId> front(const TenantShare& share) const;

  bool contains(SeqId seq_id) const { return where_.contains(seq_id); }
  int32_t size() const { return static_cast<int32_t>(where_.size()); }
  bool empty() const { return where_.empty(); }

  // The ordered structure and the id map agree. Returns `internal` on a bug.
  Status check_integrity() const;

 private:
  struct Key {
    int32_t priority = 0;
    std::string tenant;
    uint64_t order = 0;
    bool resumed = false;
  };
  struct Level {
    std::map<uint64_t, SeqId> resumed;                           // by first-admission order
    std::map<std::string, std::map<uint64_t, SeqId>> by_tenant;  // per tenant, by arrival order
    bool empty() const { return resumed.empty() && by_tenant.empty(); }
  };

  std::map<int32_t, Level, std::greater<>> levels_;  // highest priority first
  std::unordered_map<SeqId, Key> where_;
};

}  // namespace ds
