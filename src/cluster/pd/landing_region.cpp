#include "cluster/pd/landing_region.h"

#include <algorithm>
#include <new>
#include <utility>

namespace ds::pd {

LandingRegion::LandingRegion(size_t block_bytes, size_t n_blocks, std::shared_ptr<PageMemory> memory)
    : block_bytes_(block_bytes), n_blocks_(n_blocks), data_(std::move(memory), block_bytes * n_blocks) {
  if (data_.data() == nullptr) throw std::bad_alloc();
  for (uint32_t i = 0; i < n_blocks; ++i) free_.insert(free_.end(), i);
}

void LandingRegion::expire_locked(Clock::time_point now) {
  while (!quarantine_.empty() && quarantine_.front().until <= now) {
    for (uint32_t id : quarantine_.front().ids) free_.insert(id);
    quarantine_.pop_front();
  }
}

std::optional<std::vector<uint32_t>> LandingRegion::allocate(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  expire_locked(Clock::now());
  if (free_.size() < n) return std::nullopt;
  std::vector<uint32_t> ids;
  ids.reserve(n);
  for (auto it = free_.begin(); ids.size() < n;) {
    ids.push_back(*it);
    it = free_.erase(it);
  }
  return ids;
}

void LandingRegion::release(const std::vector<uint32_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.insert(ids.begin(), ids.end());
}

void LandingRegion::quarantine(const std::vector<uint32_t>& ids, Clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  // Kept in expiry order (the deadlines of one server's transfers are close to monotonic).
  auto pos =
      std::find_if(quarantine_.begin(), quarantine_.end(), [&](const Held& h) { return h.until > until; });
  quarantine_.insert(pos, Held{until, ids});
}

size_t LandingRegion::n_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

size_t LandingRegion::n_quarantined() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Held& h : quarantine_) n += h.ids.size();
  return n;
}

}  // namespace ds::pd
