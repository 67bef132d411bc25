#include "transport/shared_pages.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/rand.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ds::transport {

namespace {

constexpr uint64_t kHeaderBytes = 4096;             // the token's page
constexpr uint64_t kHugeAlign = uint64_t{2} << 20;  // big allocations start on a huge-page boundary
constexpr uint64_t kPageAlign = 4096;

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

Status mismatch(const std::string& what) { return Status(ErrorCode::transport_peer_mismatch, what); }

}  // namespace

Result<std::shared_ptr<SharedPageMemory>> SharedPageMemory::create(const std::string& name) {
  std::shared_ptr<SharedPageMemory> m(new SharedPageMemory());
  m->fd_ = UniqueFd(::memfd_create(name.c_str(), MFD_CLOEXEC));
  if (!m->fd_.valid())
    return Status(ErrorCode::transport_io, fmt::format("memfd_create: {}", std::strerror(errno)));
  if (RAND_bytes(m->token_.data(), static_cast<int>(m->token_.size())) != 1)
    return Status(ErrorCode::internal, "no random bytes for the shared segment's token");
  if (::ftruncate(m->fd_.get(), static_cast<off_t>(kHeaderBytes)) != 0 ||
      ::pwrite(m->fd_.get(), m->token_.data(), m->token_.size(), 0) != static_cast<ssize_t>(m->token_.size()))
    return Status(ErrorCode::transport_io, fmt::format("shared segment header: {}", std::strerror(errno)));
  m->size_ = kHeaderBytes;
  return m;
}

SharedPageMemory::~SharedPageMemory() {
  // Every allocation's owner (a PageBuffer) holds this object: none is left mapped here.
  for (const auto& [address, range] : ranges_)
    ::munmap(reinterpret_cast<void*>(address), static_cast<size_t>(range.bytes));
}

std::byte* SharedPageMemory::allocate(size_t bytes) {
  std::lock_guard lock(mu_);
  const uint64_t offset = round_up(size_, bytes >= kHugeAlign ? kHugeAlign : kPageAlign);
  const uint64_t mapped = round_up(bytes, kPageAlign);
  void* p = MAP_FAILED;
  if (::ftruncate(fd_.get(), static_cast<off_t>(offset + mapped)) == 0)
    p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    // Not shared, still usable: the peers write these pages over UCX.
    heap_bytes_ += bytes;
    return static_cast<std::byte*>(std::aligned_alloc(64, round_up(bytes, 64)));
  }
  ::madvise(p, mapped, MADV_HUGEPAGE);  // where the kernel allows huge shmem pages (advisory)
  size_ = offset + mapped;
  ranges_[reinterpret_cast<uint64_t>(p)] = {offset, mapped};
  return static_cast<std::byte*>(p);
}

void SharedPageMemory::release(std::byte* data, size_t bytes) {
  std::lock_guard lock(mu_);
  const auto it = ranges_.find(reinterpret_cast<uint64_t>(data));
  if (it == ranges_.end()) {
    heap_bytes_ -= bytes;
    std::free(data);
    return;
  }
  ::munmap(data, static_cast<size_t>(it->second.bytes));
  // Give the pages back to the kernel; the segment's size (the offsets of later ranges) stays.
  ::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(it->second.offset),
              static_cast<off_t>(it->second.bytes));
  ranges_.erase(it);
}

SharedSegmentRef SharedPageMemory::ref() const {
  std::lock_guard lock(mu_);
  return {static_cast<uint32_t>(::getpid()), static_cast<uint32_t>(fd_.get()), size_, token_};
}

std::vector<SharedRange> SharedPageMemory::ranges() const {
  std::lock_guard lock(mu_);
  std::vector<SharedRange> out;
  for (const auto& [address, range] : ranges_) out.push_back({address, range.bytes, range.offset});
  return out;
}

std::optional<uint64_t> SharedPageMemory::offset_of(uint64_t address, uint64_t bytes) const {
  std::lock_guard lock(mu_);
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  const uint64_t from = address - it->first;
  if (from > it->second.bytes || bytes > it->second.bytes - from) return std::nullopt;
  return it->second.offset + from;
}

uint64_t SharedPageMemory::heap_bytes() const {
  std::lock_guard lock(mu_);
  return heap_bytes_;
}

Result<std::unique_ptr<SharedPageMapping>> SharedPageMapping::open(const SharedSegmentRef& ref) {
  if (ref.bytes < kHeaderBytes) return mismatch("the shared segment is smaller than its header");
  const std::string path = fmt::format("/proc/{}/fd/{}", ref.pid, ref.fd);
  const UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return mismatch(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) < ref.bytes)
    return mismatch(fmt::format("{} is not the {}-byte shared segment", path, ref.bytes));
  void* p = ::mmap(nullptr, static_cast<size_t>(ref.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return mismatch(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  std::unique_ptr<SharedPageMapping> m(new SharedPageMapping(ref, static_cast<std::byte*>(p)));
  if (std::memcmp(p, ref.token.data(), ref.token.size()) != 0)
    return mismatch(fmt::format("{} holds another segment (its token differs)", path));
  return m;
}

SharedPageMapping::~SharedPageMapping() { ::munmap(base_, static_cast<size_t>(ref_.bytes)); }

std::byte* SharedPageMapping::at(uint64_t offset, uint64_t bytes) const {
  if (offset < kHeaderBytes || offset > ref_.bytes || bytes > ref_.bytes - offset) return nullptr;
  return base_ + offset;
}

}  // namespace ds::transport
