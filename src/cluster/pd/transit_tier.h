// TransitTier: the prefill server's outbox of KV blocks for P/D transfers in flight (docs/pd.md), as
// a KvTier so the engine's own tier writer copies them out of its pool — no new engine entry point.
// The engine's tier writer copies the committed prompt blocks of P/D prefills here — only keys a
// transfer expects (`expect`), so client traffic a prefill server also serves never lands here; the
// prefill service takes (and removes) the blocks a decode server granted room for, puts them over
// UCX straight into the decode server's pool, and drops the rest. Bounded: the oldest entries go
// first beyond max_bytes.
//
// Thread-safe (the engine thread looks up, the tier store's threads read and write, the prefill
// service takes and drops).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvcache/kv_tier.h"

namespace ds::pd {

struct TransitTierConfig {
  std::string name;            // "pd-outbox"
  bool only_expected = false;  // write() stores only keys a transfer expects (the prefill server's)
  int64_t max_bytes = int64_t{1} << 30;
};

class TransitTier final : public KvTier {
 public:
  explicit TransitTier(TransitTierConfig config) : config_(std::move(config)) {}

  const std::string& name() const override { return config_.name; }
  int64_t count_prefix(std::span<const uint64_t> keys) override;
  bool contains(uint64_t key) override;
  Result<TierEntry> read(uint64_t key) override;
  Status write(const TierEntry& entry) override;
  // DELETE /v1/cache: blocks in transit of the matching requests go too.
  Result<int64_t> remove_matching(const TierScopeFilter& filter) override;
  TierStats stats() const override;

  // The prefill service's side: wait for and take, drop.
  // The entries of `keys`, removed, once all are present; nullopt at the deadline (none removed).
  std::optional<std::vector<TierEntry>> take_all(const std::vector<uint64_t>& keys,
                                                 std::chrono::steady_clock::time_point deadline);
  // The entries of the longest leading run of `keys` present now, removed (none: empty).
  std::vector<TierEntry> take_ready(std::span<const uint64_t> keys);
  void drop(const std::vector<uint64_t>& keys);
  // only_expected: the keys a running transfer waits for (counted: two transfers may share a
  // prefix); unexpect after the transfer, before its drop.
  void expect(const std::vector<uint64_t>& keys);
  void unexpect(const std::vector<uint64_t>& keys);
  int64_t n_entries() const;
  int64_t bytes_held() const;

 private:
  void insert_locked(TierEntry entry);
  void erase_locked(uint64_t key);

  const TransitTierConfig config_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::list<uint64_t> order_;  // oldest first
  struct Slot {
    TierEntry entry;
    std::list<uint64_t>::iterator pos;
  };
  std::unordered_map<uint64_t, Slot> entries_;
  std::unordered_map<uint64_t, int> expected_;
  int64_t bytes_ = 0;
  TierStats stats_;
};

}  // namespace ds::pd
