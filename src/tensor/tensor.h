// Non-owning views over contiguous row-major data, and a small owning f32 tensor.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/aligned_buffer.h"
#include "tensor/dtype.h"

namespace ds {

constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  std::string to_string() const;  // "[129280, 4096]"
};

// Contiguous, row-major view. Does not own `data`.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

// Owning, aligned, row-major f32 tensor for activations and scratch.
class TensorF32 {
 public:
  TensorF32() = default;
  explicit TensorF32(Shape shape) { reshape(shape); }
  // Reallocates only when the element count grows beyond the capacity; contents undefined.
  void reshape(Shape shape) {
    shape_ = shape;
    if (static_cast<size_t>(shape.numel()) > buf_.size()) buf_.resize(static_cast<size_t>(shape.numel()));
  }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  float* data() { return buf_.data(); }
  const float* data() const { return buf_.data(); }
  float* row(int64_t i) { return buf_.data() + i * shape_[shape_.rank - 1]; }
  const float* row(int64_t i) const { return buf_.data() + i * shape_[shape_.rank - 1]; }
  TensorView view() const { return TensorView{buf_.data(), DType::f32, shape_}; }

 private:
  Shape shape_;
  AlignedBuffer<float> buf_;
};

}  // namespace ds
