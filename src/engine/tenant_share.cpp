#include "engine/tenant_share.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "base/assert.h"

namespace ds {

void TenantShare::activate(const std::string& tenant) {
  const auto it = tenants_.find(tenant);
  if (it != tenants_.end()) {
    ++it->second.n_seqs;
    return;
  }
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (const auto& [name, entry] : tenants_) lowest = std::min(lowest, entry.served_tokens);
  tenants_.emplace(tenant, Entry{tenants_.empty() ? 0 : lowest, 1});
}

void TenantShare::deactivate(const std::string& tenant) {
  const auto it = tenants_.find(tenant);
  DS_ASSERT(it != tenants_.end() && it->second.n_seqs > 0, "deactivate of an inactive tenant");
  if (--it->second.n_seqs == 0) tenants_.erase(it);
}

void TenantShare::charge(const std::string& tenant, int64_t n_tokens) {
  const auto it = tenants_.find(tenant);
  DS_ASSERT(it != tenants_.end(), "charge of an inactive tenant");
  it->second.served_tokens += n_tokens;
}

int64_t TenantShare::served_tokens(const std::string& tenant) const {
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.served_tokens;
}

int32_t TenantShare::n_seqs(const std::string& tenant) const {
  const auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.n_seqs;
}

Status TenantShare::check_integrity() const {
  for (const auto& [name, entry] : tenants_) {
    if (entry.n_seqs <= 0) {
      return Status(ErrorCode::internal,
                    fmt::format("tenant '{}' is active with {} sequences", name, entry.n_seqs));
    }
  }
  return ok_status();
}

}  // namespace ds
