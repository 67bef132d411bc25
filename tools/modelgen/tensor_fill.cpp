#include "tensor_fill.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "base/assert.h"
#include "counter_rng.h"
#include "fp4_quant.h"
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

// Row t of a hash-routing table: n_cols distinct ids from [0, id_range) by a partial
// Fisher-Yates shuffle driven by the counter RNG, so each row is a pure function of (key, t).
std::vector<uint8_t> fill_expert_ids(const TensorSpec& spec, uint64_t key, ThreadPool& pool) {
  const int64_t n_rows = spec.shape[0];
  const int64_t n_cols = spec.shape[1];
  const int64_t range = spec.id_range;
  DS_ASSERT(range >= n_cols && n_cols > 0, "tid2eid needs at least as many experts as ids per token");
  std::vector<uint8_t> bytes(static_cast<size_t>(n_rows * n_cols) * sizeof(int64_t));
  auto* dst = reinterpret_cast<int64_t*>(bytes.data());
  pool.parallel_range(n_rows, 1024, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> perm(static_cast<size_t>(range));
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t e = 0; e < range; ++e) perm[static_cast<size_t>(e)] = e;
      for (int64_t j = 0; j < n_cols; ++j) {
        const uint64_t h = mix64(key + static_cast<uint64_t>(t * n_cols + j + 1) * 0x9e3779b97f4a7c15ull);
        const int64_t pick = j + static_cast<int64_t>(h % static_cast<uint64_t>(range - j));
        std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(pick)]);
        dst[t * n_cols + j] = perm[static_cast<size_t>(j)];
      }
    }
  });
  return bytes;
}

}  // namespace

InitAffine init_affine(const TensorSpec& spec) {
  switch (spec.init) {
    case InitKind::linear:
      return {spec.gain / std::sqrt(static_cast<float>(spec.in_features())), 0.0f};
    case InitKind::norm:
      return {0.1f, 1.0f};
    case InitKind::embedding:
      return {1.0f, 0.0f};
    case InitKind::gate_bias:
    case InitKind::hc_base:
      return {0.1f, 0.0f};
    case InitKind::hc_scale:
      return {0.1f, 0.5f};
    case InitKind::attn_sink:
      return {1.0f, 0.0f};
    case InitKind::expert_ids:
      return {1.0f, 0.0f};  // not used: ids are drawn by fill_expert_ids
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
      if (spec.scale_format == ScaleFormat::e8m0) {
        Fp8BlockWeightsE8m0 q = quantize_fp8_blocks_e8m0(w.data(), spec.shape[0], spec.shape[1],
                                                         spec.fp8_block, pool, spec.fp8_tile_rows);
        out.bytes = std::move(q.q);
        out.scale_bytes = std::move(q.scales);
        break;
      }
      Fp8BlockWeights q = quantize_fp8_blocks(w.data(), spec.shape[0], spec.shape[1], spec.fp8_block, pool);
      out.bytes = std::move(q.q);
      out.scale_bytes.resize(q.scale_inv.size() * sizeof(float));
      std::memcpy(out.scale_bytes.data(), q.scale_inv.data(), out.scale_bytes.size());
      break;
    }
    case DType::i8: {
      // Packed FP4: draw the logical [out, in] matrix, then quantise per 32-group.
      const int64_t rows = spec.shape[0];
      const int64_t cols = spec.in_features();
      std::vector<float> w(static_cast<size_t>(rows * cols));
      float* dst = w.data();
      const InitAffine a = init_affine(spec);
      pool.parallel_range(rows * cols, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          dst[i] = a.offset + a.scale * normal_at(key, static_cast<uint64_t>(i));
      });
      Fp4Weights q = quantize_fp4_rows(w.data(), rows, cols, pool);
      out.bytes = std::move(q.packed);
      out.scale_bytes = std::move(q.scales);
      break;
    }
    case DType::i64: {
      DS_ASSERT(spec.init == InitKind::expert_ids, "only tid2eid tables are I64");
      out.bytes = fill_expert_ids(spec, key, pool);
      break;
    }
    default:
      DS_ASSERT(false, "the tensor plan only uses bf16, f32, f8_e4m3, i8 (packed FP4) and i64");
  }
  return out;
}

}  // namespace ds::modelgen
