// LandingRegion: the decode server's memory that prefill servers put KV pages into (docs/pd.md),
// allocated once at start and registered with UCX once per transfer slot (transfer_slots.h), so a
// transfer only picks free blocks and names them in its grant: no allocation, registration or remote
// key packing per request.
//
// Blocks of a transfer that failed after its grant went out are quarantined until the prefill
// server can no longer be writing them (its put deadline), then reused: a late put never lands in
// another request's blocks. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "base/page_memory.h"

namespace ds::pd {

class LandingRegion {
 public:
  using Clock = std::chrono::steady_clock;
  // The pages come from `memory` (null: the heap; the decode server's shared segment when it has
  // one, so a prefill server on the same host writes the states with memcpy).
  LandingRegion(size_t block_bytes, size_t n_blocks, std::shared_ptr<PageMemory> memory = nullptr);

  // Null when the memory could not provide the pages.
  std::byte* data() { return data_.data(); }
  size_t bytes() const { return block_bytes_ * n_blocks_; }
  size_t block_bytes() const { return block_bytes_; }
  size_t n_blocks() const { return n_blocks_; }
  const std::byte* block(uint32_t id) const { return data_.data() + size_t{id} * block_bytes_; }

  // n free block ids (lowest first, so a transfer's blocks are mostly contiguous: fewer, larger
  // puts); nullopt when fewer than n are free.
  std::optional<std::vector<uint32_t>> allocate(size_t n);
  void release(const std::vector<uint32_t>& ids);
  // Free again at `until` (a failed transfer's blocks: the prefill server may still be writing).
  void quarantine(const std::vector<uint32_t>& ids, Clock::time_point until);
  size_t n_free() const;
  size_t n_quarantined() const;

 private:
  void expire_locked(Clock::time_point now);

  const size_t block_bytes_;
  const size_t n_blocks_;
  PageBuffer data_;  // not initialised: pages are touched when written
  mutable std::mutex mu_;
  std::set<uint32_t> free_;
  struct Held {
    Clock::time_point until;
    std::vector<uint32_t> ids;
  };
  std::deque<Held> quarantine_;
};

}  // namespace ds::pd
