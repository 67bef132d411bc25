#include "model/dense_mlp.h"

#include "kernels/activation.h"

namespace ds {

Result<DenseMlp> DenseMlp::load(const Checkpoint& ckpt, const std::string& prefix, int64_t hidden,
                                int64_t intermediate, int block) {
  DenseMlp m;
  m.hidden_ = hidden;
  m.intermediate_ = intermediate;
  DS_ASSIGN_OR_RETURN(m.gate_, load_linear_layer(ckpt, prefix + ".gate_proj", intermediate, hidden, block));
  DS_ASSIGN_OR_RETURN(m.up_, load_linear_layer(ckpt, prefix + ".up_proj", intermediate, hidden, block));
  DS_ASSIGN_OR_RETURN(m.down_, load_linear_layer(ckpt, prefix + ".down_proj", hidden, intermediate, block));
  return m;
}

int64_t DenseMlp::stored_bytes() const {
  return gate_.w.stored_bytes() + up_.w.stored_bytes() + down_.w.stored_bytes();
}

void DenseMlp::append_bytes(std::vector<std::byte>& out) const {
  append_linear_bytes(gate_, out);
  append_linear_bytes(up_, out);
  append_linear_bytes(down_, out);
}

Result<DenseMlp> DenseMlp::from_bytes(std::span<const std::byte> in, int64_t hidden, int64_t intermediate) {
  DenseMlp m;
  m.hidden_ = hidden;
  m.intermediate_ = intermediate;
  size_t at = 0;
  DS_ASSIGN_OR_RETURN(m.gate_, read_linear_bytes(in, at, intermediate, hidden));
  DS_ASSIGN_OR_RETURN(m.up_, read_linear_bytes(in, at, intermediate, hidden));
  DS_ASSIGN_OR_RETURN(m.down_, read_linear_bytes(in, at, hidden, intermediate));
  if (at != in.size()) return Status(ErrorCode::model_bad_input, "MLP record: trailing bytes");
  return m;
}

void DenseMlp::forward(const ForwardContext& ctx, const float* x, int64_t n_rows, int64_t ldx, MlpScratch& s,
                       float* out, int64_t ld_out) const {
  if (n_rows == 0) return;
  s.gate.reshape(Shape{n_rows, intermediate_});
  s.up.reshape(Shape{n_rows, intermediate_});
  linear(ctx, gate_.w, x, n_rows, ldx, s.gate.data(), intermediate_);
  linear(ctx, up_.w, x, n_rows, ldx, s.up.data(), intermediate_);
  // h = silu(gate) ⊙ up, in place in gate: [n_rows, intermediate]
  silu_mul(ctx.isa, s.gate.data(), s.up.data(), n_rows * intermediate_, s.gate.data());
  linear(ctx, down_.w, s.gate.data(), n_rows, intermediate_, out, ld_out);
}

}  // namespace ds
