// A Hugging Face checkpoint directory: `model.safetensors`, or `model.safetensors.index.json`
// naming shards. Opening validates every shard and that each tensor the index names is in the shard
// it points to (and nowhere else). Lookups return errors naming the directory and tensor.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tensor/weight_matrix.h"
#include "weights/safetensors.h"

namespace ds {

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const TensorEntry* find(const std::string& name) const;
  Result<const TensorEntry*> get(const std::string& name) const;  // weights_missing_tensor
  // get() plus dtype/shape checks (weights_shape_mismatch naming expected and actual).
  Result<const TensorEntry*> get(const std::string& name, DType dtype, const Shape& shape) const;
  std::vector<const TensorEntry*> tensors() const;  // sorted by name
  size_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorEntry*> by_name_;
};

// A linear layer's weight as the kernels see it, from `<prefix>.weight` (+ `<prefix>.weight_scale_inv`
// F32 for F8_E4M3, V3 style; or `<prefix>.scale` F8_E8M0, V4 style). Accepts BF16, F32 and
// block-scaled F8_E4M3; checks shape [rows, cols] and the scale grid for `block` × `block` tiles.
// E8M0 scales (and F32 scales that are not 4-byte aligned in the file) are converted into
// `scale_storage`, owned by the caller: use one vector per matrix, kept alive as long as the result.
// Errors name the tensor, the expected and the actual dtype/shape.
Result<WeightMatrix> load_linear(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block, std::vector<float>& scale_storage);

// A 1-D or 2-D tensor (norm weights, biases, embeddings) converted to f32 (from F32/BF16/F16).
Result<std::vector<float>> load_f32(const Checkpoint& ckpt, const std::string& name, const Shape& shape);

}  // namespace ds
