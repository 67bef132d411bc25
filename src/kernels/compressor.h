// V4 / V4.1 KV compressor pooling (model-spec §4.4, §5.4): a softmax-gated, per-channel weighted
// sum of `ratio` consecutive token rows into one compressed entry (before RMSNorm_c, RoPE and the
// storage simulation, which the model applies with the norm/rope/quant_sim kernels).
//
// Inputs per token t: a_t = W_kv · x̂_t and z_t = W_gate · x̂_t + ape[t mod ratio], each
// coff · d_c wide (coff = 2 with overlap, else 1).
//   no overlap (HCA ratio 128, V4.1 ratio 2): entry j, channel c pools tokens rj .. rj + r − 1:
//     out[j][c] = Σ_t softmax_t(z_t[c]) · a_t[c]
//   overlap (CSA ratio 4): entry j pools 2r terms per channel, one softmax over all of them:
//     the previous group r(j−1) .. rj − 1 with (z_t[c], a_t[c]) (first-half channels), then the
//     current group rj .. rj + r − 1 with (z_t[d_c + c], a_t[d_c + c]); entry 0 of a sequence has
//     no previous group (its terms are absent, i.e. score −inf).
//
// Arithmetic per (entry, channel), in this order: m = max of the scores; e_t = exp(z_t − m);
// sum = Σ e_t in term order; p_t = e_t / sum; out = Σ p_t · a_t in term order (as the official
// `(kv * score.softmax(dim)).sum(dim)`). Paths differ only in exp (vector polynomial, ≤ 1 ulp):
// the x86 paths put channels in lanes and run the same sequence with separate multiplies and
// adds. Each (entry, channel) is independent of every other (batch invariant).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ds {

struct CompressorArgs {
  const float* kv = nullptr;     // a: [n_rows, coff * d_c], row stride ld
  const float* score = nullptr;  // z: [n_rows, coff * d_c], row stride ld (ape already added)
  int64_t ld = 0;
  int64_t n_rows = 0;  // token rows given (whole groups; a partial last group is ignored)
  int32_t ratio = 4;
  int32_t d_c = 512;
  bool overlap = false;
  // overlap only: rows [0, ratio) are the group before entry 0 (a decode state buffer or the tail
  // of the previous prefill chunk) and produce no entry of their own. When false, entry 0 is the
  // first entry of its sequence (no previous-group terms).
  bool first_has_prev = false;
  float* out = nullptr;  // [n_entries, d_c], row stride ldo
  int64_t ldo = 0;
};

inline constexpr int32_t kCompressorMaxRatio = 128;

// Entries the call produces: whole groups after the optional previous-group rows.
int64_t compressor_n_entries(const CompressorArgs& a);

// Preconditions: 1 <= ratio <= kCompressorMaxRatio, d_c >= 1, ld >= coff * d_c.
void compressor_pool(Isa isa, ThreadPool& pool, const CompressorArgs& a);

}  // namespace ds
