// Manifold-constrained hyper-connections (mHC, model-spec §4.2, §4.9): the residual is hc_mult
// streams [hc, hidden]; a sublayer reads their weighted collapse and writes back
// X'_j = post_j·f + Σ_i comb[i][j]·X_i with comb Sinkhorn-normalised. The hyper-head (§4.9)
// collapses the final streams for the norm and the head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/isa.h"
#include "model/v4_numerics.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

struct MhcDims {
  int64_t hc = 0;      // streams
  int64_t hidden = 0;  // per stream
  int sinkhorn_iters = 0;
  float eps = 0;        // hc_eps
  double norm_eps = 0;  // rms_norm_eps (the rho normaliser)
};

// One sublayer's `<prefix>_fn` [(2+hc)·hc, hc·hidden], `_base` [(2+hc)·hc], `_scale` [3], F32.
class MhcMixer {
 public:
  static Result<MhcMixer> load(const Checkpoint& ckpt, const std::string& prefix, const MhcDims& dims);
  // From the parameters themselves: fn [(2+hc)·hc, hc·hidden], base [(2+hc)·hc], scale [3].
  static MhcMixer from_params(const MhcDims& dims, const std::vector<float>& fn, std::vector<float> base,
                              std::vector<float> scale);

  // streams: [hc, hidden] of one token -> x [hidden] (the collapse, rounded), post [hc], comb
  // [hc, hc] (comb[i·hc + j]: input stream i to output stream j).
  // isa: the kernel path of the f64 sums (kernels/mhc.h; every path gives the same bits).
  void pre(Isa isa, const V4Numerics& num, const float* streams, float* x, double* post, double* comb) const;
  // The three coefficient sets of one token without the collapse: pre [hc] (σ(·) + hc_eps),
  // post [hc], comb [hc, hc]. V4.1 collapses with the pre of the sublayer before (§5.1).
  void coefficients(Isa isa, const float* streams, double* pre, double* post, double* comb) const;
  // streams [hc, hidden] in place: X'_j = round(post_j·f + Σ_i comb[i][j]·X_i).
  void post(Isa isa, const V4Numerics& num, const float* f, const double* post, const double* comb,
            float* streams) const;

 private:
  MhcDims dims_;
  std::vector<float> fn_t_;  // `_fn` transposed: [hc·hidden, (2+hc)·hc] (see mix in v4_mhc.cpp)
  std::vector<float> base_, scale_;
};

// The hyper-head `<prefix>hc_head_{fn,base,scale}` ([hc, hc·hidden], [hc], [1]).
class MhcHead {
 public:
  static Result<MhcHead> load(const Checkpoint& ckpt, const std::string& prefix, const MhcDims& dims);
  // streams: [hc, hidden] -> out [hidden] (rounded).
  void collapse(Isa isa, const V4Numerics& num, const float* streams, float* out) const;

 private:
  MhcDims dims_;
  std::vector<float> fn_t_;  // `hc_head_fn` transposed: [hc·hidden, hc]
  std::vector<float> base_, scale_;
};

MhcDims mhc_dims(const ModelConfig& c);

// x [hidden] = Σ_k pre_k · streams_k in double, rounded once at `point` (V4.1's final collapse
// uses head_collapse, like V4's hyper-head).
void mhc_collapse(Isa isa, const V4Numerics& num, const MhcDims& dims, const float* streams,
                  const double* pre, float* x, Bf16Point point = Bf16Point::mhc_collapse);

}  // namespace ds
