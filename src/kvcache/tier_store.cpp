#include "kvcache/tier_store.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace ds {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time the calling thread has used.
int64_t thread_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

TierStore::TierStore(std::vector<std::shared_ptr<KvTier>> tiers, TierBlockIo io,
                     int32_t max_queued_write_jobs)
    : tiers_(std::move(tiers)),
      io_(std::move(io)),
      max_queued_write_jobs_(max_queued_write_jobs),
      writer_([this] { write_loop(); }),
      restorer_([this] { restore_loop(); }) {}

TierStore::~TierStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  writer_.join();
  restorer_.join();
}

int64_t count_prefix_across_tiers(std::span<const std::shared_ptr<KvTier>> tiers,
                                  std::span<const uint64_t> keys) {
  // The longest run any tier holds, then from its end again, until no tier holds the next key.
  int64_t n = 0;
  while (n < static_cast<int64_t>(keys.size())) {
    int64_t run = 0;
    for (const auto& tier : tiers)
      run = std::max(run, tier->count_prefix(keys.subspan(static_cast<size_t>(n))));
    if (run == 0) break;
    n += run;
  }
  return n;
}

int64_t TierStore::count_prefix(std::span<const uint64_t> keys) const {
  return count_prefix_across_tiers(tiers_, keys);
}

bool TierStore::submit_write(std::vector<TierBlockRef> blocks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || static_cast<int32_t>(write_queue_.size()) >= max_queued_write_jobs_) {
      ++stats_.n_write_jobs_dropped;
      return false;
    }
    write_queue_.push_back(std::move(blocks));
  }
  work_cv_.notify_all();
  return true;
}

void TierStore::submit_restore(uint64_t seq_id, std::vector<TierBlockRef> blocks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    restore_queue_.push_back(RestoreJob{seq_id, std::move(blocks)});
  }
  work_cv_.notify_all();
}

TierCompletions TierStore::take_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(done_, {});
}

bool TierStore::has_pending_restores() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !restore_queue_.empty() || !done_.restored.empty();
}

TierStoreStats TierStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void TierStore::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return write_queue_.empty() && restore_queue_.empty() && n_busy_ == 0; });
}

void TierStore::write_loop() {
  std::vector<TierEntry> scratch;  // one batch of entries, their byte buffers reused
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || !write_queue_.empty(); });
    if (stop_) return;
    std::vector<TierBlockRef> job = std::move(write_queue_.front());
    write_queue_.pop_front();
    ++n_busy_;
    lock.unlock();
    const int64_t cpu0 = thread_cpu_ns();
    write_blocks(job, scratch);
    const int64_t cpu_ns = thread_cpu_ns() - cpu0;
    std::vector<int32_t> block_ids;
    block_ids.reserve(job.size());
    for (const TierBlockRef& b : job) block_ids.push_back(b.block_id);
    lock.lock();
    stats_.write_cpu_ns_total += cpu_ns;
    done_.written.push_back(std::move(block_ids));
    --n_busy_;
    idle_cv_.notify_all();
  }
}

void TierStore::write_blocks(const std::vector<TierBlockRef>& blocks, std::vector<TierEntry>& batch) {
  for (size_t begin = 0; begin < blocks.size(); begin += kWriteBatchBlocks) {
    const size_t end = std::min(blocks.size(), begin + kWriteBatchBlocks);
    write_batch(std::span(blocks).subspan(begin, end - begin), batch);
  }
}

// One lookup per tier for the whole batch, then one batched write per tier of what it lacks (a
// remote tier: two round trips per batch instead of two or three per block).
void TierStore::write_batch(std::span<const TierBlockRef> blocks, std::vector<TierEntry>& batch) {
  std::vector<uint64_t> keys;
  for (const TierBlockRef& b : blocks) keys.push_back(b.key);
  std::vector<std::vector<bool>> held;
  for (const auto& tier : tiers_) held.push_back(tier->contains_each(keys));
  if (batch.size() < blocks.size()) batch.resize(blocks.size());
  std::vector<size_t> exported;  // indices into blocks (and batch) of the entries to write
  int64_t n_already = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    bool everywhere = true;
    for (const std::vector<bool>& h : held) everywhere = everywhere && h[i];
    if (everywhere) {
      ++n_already;
      continue;
    }
    const TierBlockRef& b = blocks[i];
    TierEntry& e = batch[i];
    e.bytes.resize(static_cast<size_t>(io_.block_bytes));
    if (!io_.export_block(b.block_id, e.bytes).ok()) continue;
    e.key = b.key;
    e.prev_key = b.prev_key;
    e.tokens = b.tokens;
    e.expires_at_unix_s = b.expires_at_unix_s;
    e.scope = b.scope;
    exported.push_back(i);
  }
  for (size_t t = 0; t < tiers_.size(); ++t) {
    std::vector<const TierEntry*> missing;
    for (const size_t i : exported)
      if (!held[t][i]) missing.push_back(&batch[i]);
    // A failing tier counts its own error and is skipped; the others still get the entries.
    if (!missing.empty()) (void)tiers_[t]->write_batch(missing);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.n_blocks_already_stored += n_already;
  stats_.n_blocks_written += static_cast<int64_t>(exported.size());
}

void TierStore::restore_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || !restore_queue_.empty(); });
    if (stop_) return;
    RestoreJob job = std::move(restore_queue_.front());
    restore_queue_.pop_front();
    ++n_busy_;
    lock.unlock();
    const int32_t n_restored = restore_blocks(job.blocks);
    lock.lock();
    done_.restored.push_back({job.seq_id, n_restored});
    --n_busy_;
    idle_cv_.notify_all();
  }
}

int32_t TierStore::restore_blocks(const std::vector<TierBlockRef>& blocks) {
  const int64_t start_ns = now_ns();
  int32_t n_restored = 0;
  int64_t n_bytes = 0;
  for (const TierBlockRef& b : blocks) {
    bool restored = false;
    for (const auto& tier : tiers_) {
      Result<TierEntry> entry = tier->read(b.key);
      if (!entry.ok()) continue;
      // A 64-bit key collision (or a bug) must be a miss: the entry names its tokens and parent.
      if (entry->prev_key != b.prev_key || entry->tokens != b.tokens ||
          static_cast<int64_t>(entry->bytes.size()) != io_.block_bytes)
        continue;
      if (!io_.import_block(b.block_id, entry->bytes).ok()) continue;
      restored = true;
      n_bytes += static_cast<int64_t>(entry->bytes.size());
      break;
    }
    if (!restored) break;
    ++n_restored;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.n_blocks_restored += n_restored;
  if (n_restored < static_cast<int32_t>(blocks.size())) ++stats_.n_restore_failures;
  stats_.bytes_restored += n_bytes;
  stats_.restore_ns_total += now_ns() - start_ns;
  return n_restored;
}

}  // namespace ds
