// Where large page arrays live (the model's paged KV pool): the process heap by default, or memory
// a caller provides — the decode server's pool in a segment that prefill servers on the same host
// map and write with memcpy (transport/shared_pages.h, docs/pd.md). The model only asks for bytes;
// which memory backs them is the caller's choice, made before the pool is allocated.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <utility>

namespace ds {

class PageMemory {
 public:
  virtual ~PageMemory() = default;
  // `bytes` (> 0), 64-byte aligned, uninitialised; null when they cannot be had.
  virtual std::byte* allocate(size_t bytes) = 0;
  // Gives back an allocation of this object (the same `bytes`).
  virtual void release(std::byte* data, size_t bytes) = 0;
};

// One allocation, from a PageMemory or (none given) the heap, given back when it goes. Move-only.
class PageBuffer {
 public:
  PageBuffer() = default;
  // Null data() when the memory could not provide `bytes` (check it).
  PageBuffer(std::shared_ptr<PageMemory> memory, size_t bytes) : memory_(std::move(memory)) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_ = memory_ ? memory_->allocate(rounded) : static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    bytes_ = data_ != nullptr ? rounded : 0;
  }
  ~PageBuffer() { reset(); }
  PageBuffer(PageBuffer&& o) noexcept
      : memory_(std::move(o.memory_)),
        data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      memory_ = std::move(o.memory_);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset() {
    if (data_ == nullptr) return;
    if (memory_)
      memory_->release(data_, bytes_);
    else
      std::free(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  std::shared_ptr<PageMemory> memory_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ds
