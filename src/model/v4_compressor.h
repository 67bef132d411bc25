// The V4 KV compressor (model-spec §4.4): every `ratio` tokens become one compressed entry, a
// per-channel softmax-gated pooling of W_kv·x̂ under scores W_gate·x̂ + ape, then RMSNorm_c, RoPE
// at the group's first position and the storage simulation (FP8 KV, or Hadamard + FP4 for the
// indexer's keys). CSA (ratio 4) overlaps: an entry pools the previous group's first-half
// channels and its own group's second half under one softmax. V4.1 (§5.4): no overlap, no ape,
// and ratio 1 has no gate (the entry is the normed projection itself).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_kv_state.h"
#include "model/v4_numerics.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"

namespace ds {

struct V4CompressorDims {
  int32_t ratio = 0;
  bool overlap = false;
  int64_t d_c = 0;  // entry width (head_dim, or index_head_dim for the indexer)
  int64_t rope_dim = 0;
  int64_t hidden = 0;
  double eps = 0;                       // rms_norm_eps
  bool index_keys = false;              // Hadamard before the storage simulation (indexer keys)
  CacheQuant quant = CacheQuant::none;  // the entries' storage (LayerSpec::compressed_kv / index_keys)
  bool has_ape = true;                  // V4.1: no positional bias
  bool gated = true;                    // V4.1 ratio 1: no wgate, every group is one token
};

class V4Compressor {
 public:
  // `<prefix>{wkv,wgate}.weight` [coff·d_c, hidden], `ape` [ratio, coff·d_c] F32, `norm.weight` [d_c].
  static Result<V4Compressor> load(const Checkpoint& ckpt, const std::string& prefix,
                                   const V4CompressorDims& dims);

  // The projections of rows x [n, hidden] (the attention's normed input): kv = W_kv·x and, gated,
  // score = W_gate·x, each [n, width()] (row stride width()). Row results do not depend on n, so a
  // step projects all its sequences' rows at once (weights read once per step).
  void project(const ForwardContext& ctx, const float* x, int64_t n, float* kv, float* score) const;
  int64_t width() const { return (dims_.overlap ? 2 : 1) * dims_.d_c; }

  // Feeds rows at positions pos[0..n) into `st`, given their projections kv, score [n, width()]
  // (project(); score is ignored when ungated); the entries their groups complete are entries
  // n_present, n_present + 1, ... and are returned in `new_entries` [n_new, d_c] (resized). A group
  // whose entry is below n_present (a replay of a cached prefix: the entry is in the shared blocks
  // already) updates the state but returns nothing. pre_rope (optional): the same entries after
  // the norm, before RoPE and the storage simulation (V4.1 derives the index keys from them);
  // entry_pos (optional): their first token positions.
  void feed(const ForwardContext& ctx, const V4Numerics& num, const float* kv, const float* score, int64_t n,
            const int32_t* pos, const std::vector<float>& inv_freq, V4CompressorState& st, int64_t n_present,
            std::vector<float>& new_entries, std::vector<float>* pre_rope = nullptr,
            std::vector<int32_t>* entry_pos = nullptr) const;

  const V4CompressorDims& dims() const { return dims_; }

 private:
  V4CompressorDims dims_;
  Linear wkv_, wgate_;
  std::vector<float> ape_, norm_;
};

// The storage simulation `quant` of rows [n_rows, width] in place (model-spec §3). The main-KV
// FP8 ones (fp8_64_pow2_nope: channels [0, width - rope_dim); fp8_32_pow2: all) follow
// num.kv_fp8_sim; the FP4 ones always run (they are the stored format of the indexer / V4.1 KV).
void v4_cache_quant_sim(Isa isa, const V4Numerics& num, CacheQuant quant, float* rows, int64_t n_rows,
                        int64_t width, int64_t rope_dim);

}  // namespace ds
