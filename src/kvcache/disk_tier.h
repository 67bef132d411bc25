// DiskTier: prefix KV blocks on a local SSD (`--kv-disk-dir DIR --kv-disk-gib N`).
//
// One file per entry, DIR/<namespace hex>/<key hex>.kv, holding tier_entry_format's bytes (header,
// tokens, payload, XXH3 checksum). A write goes to a temp file in the same folder and is renamed
// into place, so a reader (or a server restarted after kill -9) sees a whole entry or none; a
// torn or flipped file fails its checks on read, counts as a miss and is deleted.
// No fsync: a process crash keeps the page cache; a power loss may leave entries that fail
// their checksum, which is a miss.
//
// The index (key -> size, LRU order) lives in memory. At start-up a background thread scans the
// namespace folder (oldest mtime first) so a restarted server hits what the last one wrote;
// until the scan is done a lookup of a key the index lacks looks for its file (stat + header), so a
// request that arrives during the scan hits what is on disk too. Capacity: least recently used
// entries are deleted once the total exceeds capacity_bytes. Expired entries (TierEntry::
// expires_at_unix_s) are never served: deleted when the scan, a lookup or a read finds them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "kvcache/kv_tier.h"

namespace ds {

struct DiskTierConfig {
  std::string dir;
  int64_t capacity_bytes = 0;
  uint64_t namespace_id = 0;
  // Unix seconds for expiry checks (tier_ttl.h); empty = the system clock (tests inject one).
  std::function<int64_t()> now_unix_s;
  // Called by the scan thread before it scans (tests hold the scan back with it); empty = none.
  std::function<void()> before_scan;
};

class DiskTier final : public KvTier {
 public:
  // Creates DIR/<namespace> when missing and starts the scan. io_error naming the folder;
  // invalid_argument for a capacity <= 0.
  static Result<std::unique_ptr<DiskTier>> open(const DiskTierConfig& cfg);
  ~DiskTier() override;
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const std::string& name() const override { return name_; }
  int64_t count_prefix(std::span<const uint64_t> keys) override;
  bool contains(uint64_t key) override;
  Result<TierEntry> read(uint64_t key) override;
  Status write(const TierEntry& entry) override;
  Result<int64_t> remove_matching(const TierScopeFilter& filter) override;
  TierStats stats() const override;

  // Blocks until the start-up scan is done (tests, benchmarks).
  void wait_for_scan();
  // The file that holds `key` (tests corrupt it).
  std::string entry_path(uint64_t key) const;

 private:
  explicit DiskTier(const DiskTierConfig& cfg, std::string folder);
  void scan();
  // Adds or refreshes an entry as most recently used, then evicts over capacity. Lock held.
  void index_insert_locked(uint64_t key, int64_t bytes, int64_t expires_at_unix_s);
  // True (and the entry deleted) when it is past its expiry. Lock held.
  bool expire_locked(uint64_t key);
  int64_t now_unix_s() const;
  void index_erase_locked(uint64_t key);
  void evict_locked();
  void drop_corrupt(uint64_t key);
  // True when `key` is indexed, or the start-up scan is still running and the key's file exists
  // and is not expired (it is indexed then, as most recently used). Lock held.
  bool indexed_locked(uint64_t key);

  struct Item {
    int64_t bytes = 0;
    int64_t expires_at_unix_s = 0;
    std::list<uint64_t>::iterator lru_pos;
  };

  DiskTierConfig cfg_;
  std::string folder_;
  std::string name_ = "disk";
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Item> index_;
  std::list<uint64_t> lru_;  // front: least recently used
  TierStats stats_;
  bool scan_done_ = false;
  std::condition_variable scan_cv_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> tmp_counter_{0};
  std::thread scan_thread_;  // last: started when everything above exists
};

}  // namespace ds
