#include "model/embedding.h"

#include <cstring>

#include "base/assert.h"
#include "tensor/dtype.h"

namespace ds {

Result<Embedding> Embedding::load(const Checkpoint& ckpt, const std::string& name, int64_t vocab,
                                  int64_t dim) {
  DS_ASSIGN_OR_RETURN(const TensorEntry* e, ckpt.get(name));
  const Shape want{vocab, dim};
  if (!(e->shape == want)) {
    return Status(ErrorCode::weights_shape_mismatch, ckpt.dir() + ": tensor " + name + ": shape " +
                                                         e->shape.to_string() + ", expected " +
                                                         want.to_string());
  }
  if (e->dtype != DType::bf16 && e->dtype != DType::f16 && e->dtype != DType::f32) {
    return Status(ErrorCode::weights_shape_mismatch, ckpt.dir() + ": tensor " + name + ": dtype " +
                                                         std::string(dtype_name(e->dtype)) +
                                                         ", expected BF16, F16 or F32");
  }
  Embedding emb;
  emb.entry_ = e;
  emb.vocab_ = vocab;
  emb.dim_ = dim;
  return emb;
}

void Embedding::lookup(const int32_t* ids, int64_t n, float* out, int64_t ld_out) const {
  for (int64_t t = 0; t < n; ++t) {
    DS_ASSERT(ids[t] >= 0 && ids[t] < vocab_, "token id validated by the model before lookup");
    float* dst = out + t * ld_out;
    const int64_t base = static_cast<int64_t>(ids[t]) * dim_;
    switch (entry_->dtype) {
      case DType::bf16: {
        const auto* src = reinterpret_cast<const uint16_t*>(entry_->data) + base;
        for (int64_t i = 0; i < dim_; ++i) dst[i] = bf16_to_f32(src[i]);
        break;
      }
      case DType::f16: {
        const auto* src = reinterpret_cast<const uint16_t*>(entry_->data) + base;
        for (int64_t i = 0; i < dim_; ++i) dst[i] = f16_to_f32(src[i]);
        break;
      }
      default:
        std::memcpy(dst, reinterpret_cast<const float*>(entry_->data) + base,
                    static_cast<size_t>(dim_) * sizeof(float));
        break;
    }
  }
}

}  // namespace ds
