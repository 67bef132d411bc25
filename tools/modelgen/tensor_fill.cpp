#include "tensor_fill.h"

#include <cmath>
#include <cstring>

#include "base/assert.h"
#include "counter_rng.h"
#include "fp8_block_quant.h"
#include "tensor/dtype.h"

namespace ds::modelgen {
namespace {

// Elements per parallel chunk: large enough to amortise dispatch, small enough to balance.
constexpr int64_t kGrain = 1 << 16;

template <class Store>
void fill_parallel(const TensorSpec& spec, uint64_t key, ThreadPool& pool, Store store) {
  const InitAffine a = init_affine(spec);
  pool.parallel_range(spec.shape.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      store(i, a.offset + a.scale * normal_at(key, static_cast<uint64_t>(i)));
  });
}

}  // namespace

InitAffine init_affine(const TensorSpec& spec) {
  switch (spec.init) {
    case InitKind::linear:
      return {spec.gain / std::sqrt(static_cast<float>(spec.shape[spec.shape.rank - 1])), 0.0f};
    case InitKind::norm:
      return {0.1f, 1.0f};
    case InitKind::embedding:
      return {1.0f, 0.0f};
    case InitKind::gate_bias:
      return {0.1f, 0.0f};
  }
  return {1.0f, 0.0f};
}

FilledTensor fill_tensor(const TensorSpec& spec, uint64_t seed, ThreadPool& pool) {
  const uint64_t key = tensor_key(seed, spec.name);
  const auto n = static_cast<size_t>(spec.shape.numel());
  FilledTensor out;
  switch (spec.dtype) {
    case DType::bf16: {
      out.bytes.resize(n * 2);
      auto* dst = reinterpret_cast<uint16_t*>(out.bytes.data());
      fill_parallel(spec, key, pool, [dst](int64_t i, float v) { dst[i] = f32_to_bf16(v); });
      break;
    }
    case DType::f32: {
      out.bytes.resize(n * 4);
      auto* dst = reinterpret_cast<float*>(out.bytes.data());
      fill_parallel(spec, key, pool, [dst](int64_t i, float v) { dst[i] = v; });
      break;
    }
    case DType::f8_e4m3: {
      std::vector<float> w(n);
      float* dst = w.data();
      fill_parallel(spec, key, pool, [dst](int64_t i, float v) { dst[i] = v; });
      Fp8BlockWeights q = quantize_fp8_blocks(w.data(), spec.shape[0], spec.shape[1], kFp8Block, pool);
      out.bytes = std::move(q.q);
      out.scale_bytes.resize(q.scale_inv.size() * sizeof(float));
      std::memcpy(out.scale_bytes.data(), q.scale_inv.data(), out.scale_bytes.size());
      break;
    }
    default:
      DS_ASSERT(false, "the tensor plan only uses bf16, f32 and f8_e4m3");
  }
  return out;
}

}  // namespace ds::modelgen
