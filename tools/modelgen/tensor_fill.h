// Produces the stored bytes of one planned tensor from (seed, name): BF16/F32 values, FP8 codes
// or packed FP4 codes plus their block scales, or I64 expert ids. Work is split over the pool; the bytes do
// not depend on it.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "tensor_plan.h"

namespace ds::modelgen {

struct FilledTensor {
  std::vector<uint8_t> bytes;        // spec.dtype, row-major
  std::vector<uint8_t> scale_bytes;  // spec.scale_dtype() [spec.scale_shape()], only when block_quantized()
};

// Element i is offset + scale·normal_at(key, i) before storage rounding; InitKind decides the
// affine map (tensor_plan.h lists the distributions).
struct InitAffine {
  float scale = 1.0f;
  float offset = 0.0f;
};
InitAffine init_affine(const TensorSpec& spec);

FilledTensor fill_tensor(const TensorSpec& spec, uint64_t seed, ThreadPool& pool);

}  // namespace ds::modelgen
