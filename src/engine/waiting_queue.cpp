#include "engine/waiting_queue.h"

#include <fmt/format.h>

#include <tuple>

#include "base/assert.h"

namespace ds {

void WaitingQueue::push(SeqId seq_id, int32_t priority, const std::string& tenant, uint64_t order,
                        bool resumed) {
  const bool inserted = where_.emplace(seq_id, Key{priority, tenant, order, resumed}).second;
  DS_ASSERT(inserted, "sequence queued twice");
  Level& level = levels_[priority];
  const bool placed = resumed ? level.resumed.emplace(order, seq_id).second
                              : level.by_tenant[tenant].emplace(order, seq_id).second;
  DS_ASSERT(placed, "two queued sequences share an order key");
}

bool WaitingQueue::erase(SeqId seq_id) {
  const auto it = where_.find(seq_id);
  if (it == where_.end()) return false;
  const Key& key = it->second;
  const auto level_it = levels_.find(key.priority);
  DS_ASSERT(level_it != levels_.end(), "queued sequence's priority level is missing");
  Level& level = level_it->second;
  if (key.resumed) {
    level.resumed.erase(key.order);
  } else {
    const auto tenant_it = level.by_tenant.find(key.tenant);
    DS_ASSERT(tenant_it != level.by_tenant.end(), "queued sequence's tenant is missing");
    tenant_it->second.erase(key.order);
    if (tenant_it->second.empty()) level.by_tenant.erase(tenant_it);
  }
  if (level.empty()) levels_.erase(level_it);
  where_.erase(it);
  return true;
}

std::optional<SeqId> WaitingQueue::front(const TenantShare& share) const {
  if (levels_.empty()) return std::nullopt;
  const Level& level = levels_.begin()->second;
  if (!level.resumed.empty()) return level.resumed.begin()->second;
  // Fewest tokens served wins; ties go to the tenant whose head arrived first (then the name, so
  // the choice never depends on map iteration accidents).
  const std::map<uint64_t, SeqId>* best = nullptr;
  std::tuple<int64_t, uint64_t> best_key{};
  for (const auto& [tenant, fifo] : level.by_tenant) {
    const std::tuple<int64_t, uint64_t> key{share.served_tokens(tenant), fifo.begin()->first};
    if (best == nullptr || key < best_key) {
      best = &fifo;
      best_key = key;
    }
  }
  DS_ASSERT(best != nullptr, "a non-empty priority level without sequences");
  return best->begin()->second;
}

Status WaitingQueue::check_integrity() const {
  size_t n_placed = 0;
  for (const auto& [priority, level] : levels_) {
    if (level.empty())
      return Status(ErrorCode::internal, fmt::format("empty priority level {} kept", priority));
    auto check = [&](SeqId seq_id, uint64_t order, const std::string* tenant, bool resumed) -> Status {
      const auto it = where_.find(seq_id);
      if (it == where_.end() || it->second.priority != priority || it->second.order != order ||
          it->second.resumed != resumed || (tenant != nullptr && it->second.tenant != *tenant)) {
        return Status(ErrorCode::internal, fmt::format("queued sequence {} is misplaced", seq_id));
      }
      ++n_placed;
      return ok_status();
    };
    for (const auto& [order, seq_id] : level.resumed) DS_TRY(check(seq_id, order, nullptr, true));
    for (const auto& [tenant, fifo] : level.by_tenant) {
      if (fifo.empty())
        return Status(ErrorCode::internal, fmt::format("empty tenant queue '{}' kept", tenant));
      for (const auto& [order, seq_id] : fifo) DS_TRY(check(seq_id, order, &tenant, false));
    }
  }
  if (n_placed != where_.size()) {
    return Status(ErrorCode::internal,
                  fmt::format("{} sequences queued but {} placed in the order", where_.size(), n_placed));
  }
  return ok_status();
}

}  // namespace ds
