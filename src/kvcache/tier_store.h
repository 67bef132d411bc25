// TierStore: moves prefix KV blocks between the engine's pool and the tiers below it, off the
// step's critical path (docs/kvcache.md, Tiers).
//
// - Write path: the engine hands over a job of full, committed blocks it has pinned (so nothing
//   reallocates them meanwhile); the writer thread skips blocks a tier already holds, copies the
//   rest out of the pool (TierBlockIo::export_block) and writes them to every tier. The queue is
//   bounded: a job that does not fit is dropped and counted, never waited for.
// - Read path: a restore job names blocks the engine allocated for a sequence in the "restoring"
//   state and the keys they should hold; the restore thread reads each entry from the first tier
//   holding it, checks its tokens and parent key against the request's, and copies it into the
//   pool (import_block). It stops at the first block it cannot restore.
// - Completions are collected by the engine thread (take_completed), which then unpins written
//   blocks and hands restored ones to the scheduler.
//
// The store knows no model: the engine passes the block copy functions. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kvcache/kv_tier.h"

namespace ds {

// Leading keys the tiers hold between them, each key in some tier (a restore reads each block from
// the first tier holding it): a P/D decode server's landing tier holds the blocks after those its
// SSD tier holds.
int64_t count_prefix_across_tiers(std::span<const std::shared_ptr<KvTier>> tiers,
                                  std::span<const uint64_t> keys);

struct TierBlockIo {
  int64_t block_bytes = 0;
  // Both may run while a forward runs on other blocks: they touch only the named block.
  std::function<Status(int32_t block_id, std::span<std::byte> out)> export_block;
  std::function<Status(int32_t block_id, std::span<const std::byte> in)> import_block;
};

// One pool block and what it holds.
struct TierBlockRef {
  uint64_t key = 0;
  uint64_t prev_key = 0;
  int32_t block_id = -1;
  std::vector<int32_t> tokens;
  int64_t expires_at_unix_s = 0;  // writes: the entry's expiry (0: none)
  TierScope scope;                // writes: the writing request's salt tag and cache key
};

struct TierCompletions {
  std::vector<std::vector<int32_t>> written;  // block ids of finished (or dropped) write jobs: unpin
  struct Restore {
    uint64_t seq_id = 0;
    int32_t n_blocks_restored = 0;  // a prefix of the job's blocks
  };
  std::vector<Restore> restored;
};

struct TierStoreStats {
  int64_t n_write_jobs_dropped = 0;  // queue full
  int64_t n_blocks_written = 0;
  int64_t n_blocks_already_stored = 0;
  int64_t n_blocks_restored = 0;
  int64_t n_restore_failures = 0;  // a block the lookup promised but no tier could deliver
  int64_t bytes_restored = 0;
  int64_t restore_ns_total = 0;
  // CPU time of the writer thread on write jobs (CLOCK_THREAD_CPUTIME_ID: lookups, copies out of the
  // pool, entry encoding, tier writes), the write path's own cost apart from the engine thread's
  // pinning and queueing.
  int64_t write_cpu_ns_total = 0;
};

class TierStore {
 public:
  TierStore(std::vector<std::shared_ptr<KvTier>> tiers, TierBlockIo io, int32_t max_queued_write_jobs);
  ~TierStore();  // stops the threads after their current job; queued jobs are abandoned
  TierStore(const TierStore&) = delete;
  TierStore& operator=(const TierStore&) = delete;

  // count_prefix_across_tiers over this store's tiers.
  int64_t count_prefix(std::span<const uint64_t> keys) const;

  // False (and counted) when the queue is full: the caller unpins at once.
  bool submit_write(std::vector<TierBlockRef> blocks);
  void submit_restore(uint64_t seq_id, std::vector<TierBlockRef> blocks);
  TierCompletions take_completed();
  bool has_pending_restores() const;

  TierStoreStats stats() const;
  const std::vector<std::shared_ptr<KvTier>>& tiers() const { return tiers_; }
  // Blocks until every submitted job has completed (tests, benchmarks, shutdown ordering).
  void drain();

 private:
  struct RestoreJob {
    uint64_t seq_id;
    std::vector<TierBlockRef> blocks;
  };
  void write_loop();
  void restore_loop();
  // Blocks per batched tier lookup and write (bounds the entries held in memory at once).
  static constexpr size_t kWriteBatchBlocks = 16;
  void write_blocks(const std::vector<TierBlockRef>& blocks, std::vector<TierEntry>& batch);
  void write_batch(std::span<const TierBlockRef> blocks, std::vector<TierEntry>& batch);
  int32_t restore_blocks(const std::vector<TierBlockRef>& blocks);

  std::vector<std::shared_ptr<KvTier>> tiers_;
  TierBlockIo io_;
  int32_t max_queued_write_jobs_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::vector<TierBlockRef>> write_queue_;
  std::deque<RestoreJob> restore_queue_;
  int32_t n_busy_ = 0;  // jobs taken off a queue and not yet completed
  TierCompletions done_;
  TierStoreStats stats_;
  bool stop_ = false;
  std::thread writer_;  // last: started once everything above exists
  std::thread restorer_;
};

}  // namespace ds
