// Pages shared between processes on one host (issue 15: same-host P/D without the network path;
// docs/pd.md, "Same-host shared memory"). The decode server's KV pool and landing region live in one
// memfd segment (SharedPageMemory, a PageMemory the model allocates its page arrays from); a prefill
// server on the same host maps that segment through /proc/<pid>/fd/<fd> (SharedPageMapping) and
// writes the granted pages with memcpy instead of UCX puts.
//
// The segment's first page holds a random token that the grant carries over the authenticated
// control channel: a mapping whose token differs (a decode server on another host, a reused pid) is
// refused and the pages go over UCX as before. The kernel frees the segment when the last process
// holding it goes, so a server that dies leaves nothing behind (no /dev/shm name to clean up).
// Opening another process's fd needs the same user (ptrace read access); where that is not given
// (other users, separate pid namespaces) the prefill side falls back to UCX.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/page_memory.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace ds::transport {

inline constexpr size_t kSharedTokenBytes = 32;

// How a peer on the same host opens a segment: the owner's pid and fd, the segment's size and its token.
struct SharedSegmentRef {
  uint32_t pid = 0;
  uint32_t fd = 0;
  uint64_t bytes = 0;
  std::array<uint8_t, kSharedTokenBytes> token{};
};

// An allocation of the owner's as it lies in its segment: [address, address + bytes) of the owner's
// memory is [offset, offset + bytes) of the segment.
struct SharedRange {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t offset = 0;
};

// The owner's side: a memfd segment that grows by one mapped range per allocation. An allocation
// the segment cannot take (the kernel refuses to grow or map it) comes from the heap instead and is
// simply not shared (offset_of says so; those pages go over UCX). Thread-safe.
class SharedPageMemory final : public PageMemory {
 public:
  // `name` shows in /proc/<pid>/maps and fd listings.
  static Result<std::shared_ptr<SharedPageMemory>> create(const std::string& name);
  ~SharedPageMemory() override;

  std::byte* allocate(size_t bytes) override;
  void release(std::byte* data, size_t bytes) override;

  SharedSegmentRef ref() const;
  // The shared allocations, by address.
  std::vector<SharedRange> ranges() const;
  // The segment offset of [address, address + bytes) when it lies inside one shared allocation.
  std::optional<uint64_t> offset_of(uint64_t address, uint64_t bytes) const;
  // Bytes of allocations that came from the heap because the segment could not take them.
  uint64_t heap_bytes() const;

 private:
  SharedPageMemory() = default;

  UniqueFd fd_;
  std::array<uint8_t, kSharedTokenBytes> token_{};
  mutable std::mutex mu_;
  uint64_t size_ = 0;  // the segment's size: the header page, then the allocations
  struct Range {
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  std::map<uint64_t, Range> ranges_;  // by mapped address
  uint64_t heap_bytes_ = 0;
};

// The peer's side: another process's segment mapped read-write here. RAII: unmapped on destruction.
class SharedPageMapping {
 public:
  // transport_peer_mismatch when the segment cannot be opened or mapped, is smaller than ref.bytes,
  // or its token differs from ref.token (not the segment the grant meant).
  static Result<std::unique_ptr<SharedPageMapping>> open(const SharedSegmentRef& ref);
  ~SharedPageMapping();
  SharedPageMapping(const SharedPageMapping&) = delete;
  SharedPageMapping& operator=(const SharedPageMapping&) = delete;

  const SharedSegmentRef& ref() const { return ref_; }
  // Where [offset, offset + bytes) of the segment is mapped here; null when it is outside.
  std::byte* at(uint64_t offset, uint64_t bytes) const;

 private:
  SharedPageMapping(SharedSegmentRef ref, std::byte* base) : ref_(ref), base_(base) {}
  SharedSegmentRef ref_;
  std::byte* base_;
};

}  // namespace ds::transport
