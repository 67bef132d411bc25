// Owning, 64-byte aligned, uninitialised buffer of trivially copyable T (activations, scratch).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace ds {

template <class T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Discards the contents when the size changes.
  void resize(size_t n) {
    if (n == size_) return;
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (n == 0) return;
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    size_ = n;
  }
  void zero() {
    if (size_) std::memset(data_, 0, size_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ds
