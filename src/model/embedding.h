// Token embedding table left in its stored precision (BF16 in V3: 129280 × 7168 would be 3.7 GB
// as f32); rows are widened to f32 on lookup.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "weights/checkpoint.h"

namespace ds {

class Embedding {
 public:
  Embedding() = default;
  // `name` [vocab, dim], BF16, F16 or F32.
  static Result<Embedding> load(const Checkpoint& ckpt, const std::string& name, int64_t vocab, int64_t dim);

  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return dim_; }
  const TensorEntry& entry() const { return *entry_; }
  // out: [n, dim]. Precondition: every id in [0, vocab) (the model validates input first).
  void lookup(const int32_t* ids, int64_t n, float* out, int64_t ld_out) const;

 private:
  const TensorEntry* entry_ = nullptr;
  int64_t vocab_ = 0;
  int64_t dim_ = 0;
};

}  // namespace ds
