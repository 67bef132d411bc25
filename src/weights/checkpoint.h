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
// F32 for F8_E4M3, V3 style; or `<prefix>.scale` F8_E8M0, V4 style). Accepts BF16, F32,
// block-scaled F8_E4M3 and packed FP4 (below); checks shape [rows, cols] and the scale grid for
// `block` × `block` tiles. E8M0 scales of F8_E4M3 (and F32 scales that are not 4-byte aligned in
// the file) are converted into `scale_storage`, owned by the caller: use one vector per matrix,
// kept alive as long as the result.
//
// Packed FP4 (V4 routed experts) is detected by the weight's dtype I8: `.weight` I8
// [rows, cols / 2] (element 2k in the low nibble of byte k) with `.scale` F8_E8M0
// [rows, cols / 32]; the result is WeightFormat::fp4_e2m1_block with scales_e8m0 pointing into the
// mapped file (no copy, `block` unused). cols must be a multiple of 32.
//
// An E8M0 scale byte 255 (NaN) is a load error (weights_bad_tensor) naming the scale tensor and
// the tile. Other errors name the tensor, the expected and the actual dtype/shape.
Result<WeightMatrix> load_linear(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block, std::vector<float>& scale_storage);

// FP4 experts group 32 consecutive inputs under one E8M0 scale (MXFP4).
constexpr int kFp4BlockCols = 32;

// A 1-D or 2-D tensor (norm weights, biases, embeddings) converted to f32 (from F32/BF16/F16).
Result<std::vector<float>> load_f32(const Checkpoint& ckpt, const std::string& name, const Shape& shape);

// A parameter DeepSeek stores in F32 because it is used in F32 (V4: mHC `hc_*_fn/_base/_scale`,
// `attn_sink`, compressor `ape`, `gate.bias`): dtype must be F32, shape `shape`, and every value
// finite (a NaN/Inf is weights_bad_tensor naming the tensor and the element).
Result<std::vector<float>> load_f32_param(const Checkpoint& ckpt, const std::string& name,
                                          const Shape& shape);

// V4 hash routing (`ffn.gate.tid2eid`): I64 [vocab_size, n_activated] as released (I32 accepted),
// every entry an expert id in [0, n_routed_experts). Returned row-major as int32; an id out of
// range is weights_bad_tensor naming the tensor, the token row and the value.
Result<std::vector<int32_t>> load_expert_id_table(const Checkpoint& ckpt, const std::string& name,
                                                  int64_t vocab_size, int64_t n_activated,
                                                  int64_t n_routed_experts);

}  // namespace ds
