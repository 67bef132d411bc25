#include "cluster/pd/page_writes.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ds::pd {

Result<std::byte*> PageWrites::stage(size_t bytes) {
  if (bytes > staging_.size()) return Status(ErrorCode::internal, "a put larger than the staging buffer");
  if (used_ + bytes > staging_.size()) {
    DS_TRY(ep_.flush(deadline_));
    used_ = 0;
  }
  std::byte* at = staging_.data() + used_;
  used_ += bytes;
  return at;
}

Status PageWrites::write_run(std::span<const std::byte* const> pages, size_t page_bytes, uint64_t remote) {
  if (Clock::now() >= deadline_)
    return Status(ErrorCode::transport_timeout, "the transfer's deadline passed during the puts");
  const size_t bytes = pages.size() * page_bytes;
  const transport::RemoteRegion* region = grant_.region_of(remote, bytes);
  if (region == nullptr) return Status(ErrorCode::internal, "a write outside the grant's regions");
  if (shared_ != nullptr) {
    if (const transport::SharedRange* r = grant_.shared_range_of(remote, bytes)) {
      if (std::byte* to = shared_->at(r->offset + (remote - r->address), bytes)) {
        for (size_t i = 0; i < pages.size(); ++i) std::memcpy(to + i * page_bytes, pages[i], page_bytes);
        shared_bytes_ += static_cast<int64_t>(bytes);
        return ok_status();
      }
    }
  }
  DS_ASSIGN_OR_RETURN(std::byte * staged, stage(bytes));
  for (size_t i = 0; i < pages.size(); ++i) std::memcpy(staged + i * page_bytes, pages[i], page_bytes);
  DS_TRY(ep_.put(staged, bytes, remote, keys_[static_cast<size_t>(region - grant_.regions.data())]));
  ++puts_;
  return ok_status();
}

Status PageWrites::finish() {
  // The copies are ordered before the kv_written frame that follows (x86 keeps stores in order;
  // the fence says so for the compiler and other targets).
  std::atomic_thread_fence(std::memory_order_release);
  return puts_ > 0 ? ep_.flush(deadline_) : ok_status();
}

Status write_blocks(PageWrites& writes, size_t staging_bytes, const std::vector<TierEntry>& blocks,
                    std::span<const uint32_t> block_ids, const transport::KvGrant& grant) {
  const size_t bb = grant.block_bytes();
  for (const TierEntry& b : blocks)
    if (b.bytes.size() != bb)
      return Status(ErrorCode::internal,
                    fmt::format("outbox block of {} bytes, expected {}", b.bytes.size(), bb));
  std::vector<const std::byte*> pages;
  size_t array_at = 0;  // the array's offset in a block's bytes
  for (const transport::RemotePageArray& a : grant.arrays) {
    const auto ab = static_cast<size_t>(a.block_bytes);
    const size_t max_run = std::max<size_t>(1, staging_bytes / ab);
    for (size_t k = 0; k < blocks.size();) {
      size_t run = 1;
      while (run < max_run && k + run < blocks.size() && block_ids[k + run] == block_ids[k] + run) ++run;
      pages.clear();
      for (size_t i = k; i < k + run; ++i) pages.push_back(blocks[i].bytes.data() + array_at);
      DS_TRY(writes.write_run(pages, ab, a.address + uint64_t{block_ids[k]} * a.block_bytes));
      k += run;
    }
    array_at += ab;
  }
  return ok_status();
}

Status write_state(PageWrites& writes, const std::vector<std::vector<std::byte>>& pages,
                   const transport::KvGrant& grant) {
  for (size_t p = 0; p < pages.size(); ++p) {
    const std::byte* page = pages[p].data();
    DS_TRY(writes.write_run(std::span(&page, 1), pages[p].size(), grant.state_pages[p]));
  }
  return ok_status();
}

}  // namespace ds::pd
