#include "cluster/pd/transit_tier.h"

#include <utility>

namespace ds::pd {

int64_t TransitTier::count_prefix(std::span<const uint64_t> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (uint64_t k : keys) {
    if (!entries_.contains(k)) break;
    ++n;
  }
  return n;
}

bool TransitTier::contains(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.contains(key);
}

Result<TierEntry> TransitTier::read(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.n_misses;
    return Status(ErrorCode::kvcache_tier_miss, config_.name + ": no block in transit under this key");
  }
  ++stats_.n_hits;
  stats_.bytes_read += static_cast<int64_t>(it->second.entry.bytes.size());
  return it->second.entry;
}

Status TransitTier::write(const TierEntry& entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (config_.only_expected && !expected_.contains(entry.key)) return ok_status();
    ++stats_.n_writes;
    stats_.bytes_written += static_cast<int64_t>(entry.bytes.size());
    insert_locked(entry);
  }
  arrived_.notify_all();
  return ok_status();
}

void TransitTier::expect(const std::vector<uint64_t>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint64_t k : keys) ++expected_[k];
}

void TransitTier::unexpect(const std::vector<uint64_t>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint64_t k : keys) {
    const auto it = expected_.find(k);
    if (it != expected_.end() && --it->second <= 0) expected_.erase(it);
  }
}

Result<int64_t> TransitTier::remove_matching(const TierScopeFilter& filter) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> matching;
  for (const auto& [key, slot] : entries_)
    if (filter.matches(slot.entry.scope)) matching.push_back(key);
  for (const uint64_t key : matching) erase_locked(key);
  stats_.n_removed += static_cast<int64_t>(matching.size());
  return static_cast<int64_t>(matching.size());
}

TierStats TransitTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  s.n_entries = static_cast<int64_t>(entries_.size());
  s.bytes_stored = bytes_;
  return s;
}

std::optional<std::vector<TierEntry>> TransitTier::take_all(const std::vector<uint64_t>& keys,
                                                            std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto all_present = [&] {
    for (uint64_t k : keys)
      if (!entries_.contains(k)) return false;
    return true;
  };
  if (!arrived_.wait_until(lock, deadline, all_present)) return std::nullopt;
  std::vector<TierEntry> out;
  out.reserve(keys.size());
  for (uint64_t k : keys) {
    auto it = entries_.find(k);
    if (it == entries_.end()) {  // a key listed twice (chain hashes never repeat): copy the first
      out.push_back(out.back());
      continue;
    }
    out.push_back(it->second.entry);
    erase_locked(k);
  }
  return out;
}

std::vector<TierEntry> TransitTier::take_ready(std::span<const uint64_t> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TierEntry> out;
  for (uint64_t k : keys) {
    auto it = entries_.find(k);
    if (it == entries_.end()) break;
    out.push_back(it->second.entry);
    erase_locked(k);
  }
  return out;
}

void TransitTier::drop(const std::vector<uint64_t>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t k : keys) erase_locked(k);
}

int64_t TransitTier::n_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(entries_.size());
}

int64_t TransitTier::bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void TransitTier::insert_locked(TierEntry entry) {
  erase_locked(entry.key);
  const auto n = static_cast<int64_t>(entry.bytes.size());
  while (!order_.empty() && bytes_ + n > config_.max_bytes) {
    erase_locked(order_.front());
    ++stats_.n_evictions;
  }
  order_.push_back(entry.key);
  const uint64_t key = entry.key;
  entries_.emplace(key, Slot{std::move(entry), std::prev(order_.end())});
  bytes_ += n;
}

void TransitTier::erase_locked(uint64_t key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= static_cast<int64_t>(it->second.entry.bytes.size());
  order_.erase(it->second.pos);
  entries_.erase(it);
}

}  // namespace ds::pd
