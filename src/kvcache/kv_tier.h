// KvTier: storage for prefix KV blocks that outlives the engine's pool (docs/kvcache.md, Tiers).
// The pool (in the model) is the first level; a tier below it (local SSD, Redis) holds whole
// blocks keyed by the block's prefix chain hash under a stable tier namespace (kvcache/tier_key.h),
// so a restarted or a second server finds what another one wrote, and a tier never hands KV to
// another model, layout or block size.
//
// An entry carries the block's tokens and its parent's chain hash besides the bytes: a reader
// checks both against the request before restoring, so a 64-bit hash collision is a miss, never
// a wrong answer.
//
// Implementations are thread-safe: the engine thread looks up, the tier store's writer and
// restore threads read and write.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds {

// Who wrote an entry, so that `DELETE /v1/cache` can remove a tenant's entries from the tiers too
// (docs/kvcache.md, Admin routes): a tag of the request's cache salt (its XXH3, not the salt
// itself) and its prompt cache key (at most kMaxTierScopeKeyBytes; longer keys are cut there).
struct TierScope {
  uint64_t salt_tag = 0;  // tier_salt_tag(Request::cache_salt)
  std::string cache_key;  // Request::cache_key
};
inline constexpr size_t kMaxTierScopeKeyBytes = 1024;
uint64_t tier_salt_tag(std::string_view salt);

// Which entries to remove: no field = all of the tier's namespace; both = both must match.
struct TierScopeFilter {
  std::optional<uint64_t> salt_tag;
  std::optional<std::string> key_prefix;
  bool matches(const TierScope& scope) const;
};

// One block of prefix KV as a tier stores it.
struct TierEntry {
  uint64_t key = 0;               // chain hash of the block (names its whole prefix)
  uint64_t prev_key = 0;          // chain hash of the block before it (0 for the first block)
  std::vector<int32_t> tokens;    // the block's token ids (block_size_tokens of them)
  std::vector<std::byte> bytes;   // ModelRunner::export_kv_block's bytes
  int64_t expires_at_unix_s = 0;  // never served at or after this time (0: no expiry; tier_ttl.h)
  TierScope scope;                // the writing request's salt tag and cache key
};

// Latencies of tier reads or writes in fixed buckets (the /metrics histograms
// deepinfer:kv_tier_{read,write}_latency_seconds): counts[i] = observations <= kTierLatencyBoundsS[i]
// and above the bound before; the last count is above every bound.
inline constexpr std::array<double, 12> kTierLatencyBoundsS = {50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3,
                                                               5e-3,  10e-3,  25e-3,  50e-3,  100e-3, 250e-3};
struct TierLatencyCounts {
  std::array<int64_t, kTierLatencyBoundsS.size() + 1> counts{};
  int64_t sum_ns = 0;
  void add(int64_t ns);
};

// Counters since construction (metrics; docs/kvcache.md).
struct TierStats {
  int64_t n_entries = 0;
  int64_t bytes_stored = 0;
  int64_t n_hits = 0;       // read() that returned an entry
  int64_t n_misses = 0;     // read() of a key not held
  int64_t n_corrupt = 0;    // entries refused by their checks (and deleted)
  int64_t n_writes = 0;     // entries written
  int64_t n_evictions = 0;  // entries dropped for capacity
  int64_t n_expired = 0;    // entries found past their expiry (never served; deleted)
  int64_t n_errors = 0;     // I/O or connection errors (the tier was skipped)
  int64_t n_removed = 0;    // entries removed by remove_matching()
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t read_ns_total = 0;        // wall time inside read()
  int64_t write_ns_total = 0;       // wall time inside write()
  TierLatencyCounts read_latency;   // reads that returned an entry
  TierLatencyCounts write_latency;  // writes that stored one
};

class KvTier {
 public:
  virtual ~KvTier() = default;

  virtual const std::string& name() const = 0;
  // How many leading keys of `keys` the tier holds (0 at the first absent one). Cheap enough for
  // the engine thread: an in-memory index, never a blocking round trip.
  virtual int64_t count_prefix(std::span<const uint64_t> keys) = 0;
  virtual bool contains(uint64_t key) = 0;
  // The entry, checked (framing, checksum, namespace, key). kvcache_tier_miss when absent,
  // kvcache_tier_corrupt when it failed a check (it is deleted), kvcache_tier_unavailable or
  // io_error when the tier could not be read.
  virtual Result<TierEntry> read(uint64_t key) = 0;
  // Stores an entry (replacing one with the same key); evicts the least recently used entries
  // when over capacity.
  virtual Status write(const TierEntry& entry) = 0;
  // The batched forms the tier store's writer uses (a remote tier answers each in one round trip;
  // these defaults loop). contains_each: which of `keys` the tier holds. write_batch: stores every
  // entry; the first failure's status (the others are still attempted).
  virtual std::vector<bool> contains_each(std::span<const uint64_t> keys) {
    std::vector<bool> held;
    held.reserve(keys.size());
    for (const uint64_t key : keys) held.push_back(contains(key));
    return held;
  }
  virtual Status write_batch(std::span<const TierEntry* const> entries) {
    Status first;
    for (const TierEntry* e : entries) {
      Status st = write(*e);
      if (first.ok() && !st.ok()) first = std::move(st);
    }
    return first;
  }
  // Deletes every entry of this tier's namespace whose scope matches, including entries other
  // processes sharing the tier wrote; returns how many. Slow (a scan of the tier): admin only.
  virtual Result<int64_t> remove_matching(const TierScopeFilter& filter) = 0;
  virtual TierStats stats() const = 0;
};

}  // namespace ds
