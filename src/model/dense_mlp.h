// SwiGLU MLP: y = W2 · (silu(W1·x) ⊙ (W3·x)) with gate_proj = W1, up_proj = W3, down_proj = W2.
// Used for the dense layers, for each routed expert and for the shared experts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "tensor/tensor.h"
#include "weights/checkpoint.h"

namespace ds {

struct MlpScratch {
  TensorF32 gate;  // [n_rows, intermediate]
  TensorF32 up;    // [n_rows, intermediate]
};

class DenseMlp {
 public:
  // prefix = "model.layers.N.mlp" (or "...mlp.experts.E", "...mlp.shared_experts").
  static Result<DenseMlp> load(const Checkpoint& ckpt, const std::string& prefix, int64_t hidden,
                               int64_t intermediate, int block);

  int64_t hidden() const { return hidden_; }
  int64_t intermediate() const { return intermediate_; }
  // Bytes one pass over the three matrices streams (for roofline accounting).
  int64_t stored_bytes() const;

  // The three matrices as bytes (linear.h records: gate, up, down), e.g. to move an expert to another
  // rank; from_bytes checks the shapes against [intermediate, hidden] / [hidden, intermediate].
  void append_bytes(std::vector<std::byte>& out) const;
  static Result<DenseMlp> from_bytes(std::span<const std::byte> in, int64_t hidden, int64_t intermediate);

  // x: [n_rows, hidden] (row stride ldx); out: [n_rows, hidden] (row stride ld_out), overwritten.
  void forward(const ForwardContext& ctx, const float* x, int64_t n_rows, int64_t ldx, MlpScratch& s,
               float* out, int64_t ld_out) const;

 private:
  int64_t hidden_ = 0;
  int64_t intermediate_ = 0;
  Linear gate_, up_, down_;
};

}  // namespace ds
