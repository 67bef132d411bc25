// TenantShare: fair share between tenants by virtual token counters (VTC, Sheng et al., OSDI '24).
// Each active tenant (one with a sequence queued or running) has a counter of tokens it was served;
// the scheduler admits, among waiting tenants of equal priority, the one with the smallest counter.
// A tenant that becomes active starts at the smallest counter of the tenants already active, so idle
// time banks no credit and a newcomer is not punished for others' history. Inactive tenants are
// forgotten (the map stays bounded by the number of live sequences).
//
// Not thread-safe: owned by the scheduler.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"

namespace ds {

class TenantShare {
 public:
  // One more sequence of `tenant` is queued or running.
  void activate(const std::string& tenant);
  // One sequence of `tenant` left the scheduler. Precondition: the tenant is active.
  void deactivate(const std::string& tenant);
  // `tenant` was served n_tokens (prefill or decode) in a step. Precondition: the tenant is active.
  void charge(const std::string& tenant, int64_t n_tokens);

  // Tokens served to `tenant` while active (0 for an inactive tenant).
  int64_t served_tokens(const std::string& tenant) const;
  int32_t n_seqs(const std::string& tenant) const;
  int32_t n_active_tenants() const { return static_cast<int32_t>(tenants_.size()); }

  // Every active tenant has at least one sequence. Returns `internal` on a bug.
  Status check_integrity() const;

 private:
  struct Entry {
    int64_t served_tokens = 0;
    int32_t n_seqs = 0;
  };
  std::map<std::string, Entry> tenants_;
};

}  // namespace ds
