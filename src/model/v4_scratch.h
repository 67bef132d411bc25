// Working buffers of one V4 forward, owned by the model (DeepSeekV4) and reused by every layer,
// chunk and call: one forward at a time per model is already the contract (ModelRunner), and the
// layers run one after another. A fresh vector per layer and call would be allocated, faulted in
// and zeroed each time: at a 512-token chunk the attention's q and o are 16 MB each and the MoE's
// per-choice outputs 25 MB. Contents are unspecified on entry; each user writes before it reads.
#pragma once

#include <cstdint>
#include <vector>

#include "model/moe_dispatch.h"

namespace ds {

struct V4Scratch {
  // DeepSeekV4::forward: the step's residual streams [rows, hc, d], embeddings, collapsed streams
  // and final normed rows [rows, d].
  std::vector<float> streams, embedded, collapsed, final_rows;
  // V4Block: the sublayer input (collapsed, normed), mHC post/comb, the sublayer output.
  std::vector<float> x, x_norm, f;
  std::vector<double> post, comb;  // double: see mix() in v4_mhc.cpp
  // V4Attention
  std::vector<float> qa, qr, q, kva, kv, new_kv, win_kv, o, z;
  // V4Attention's per-step projections of the compressor (comp_*), V4's indexer key compressor
  // (key_*) and the indexer queries and head weights (iq, iw), over all rows of a step
  std::vector<float> comp_kv, comp_score, key_kv, key_score, iq, iw;
  // V4Moe (g, u, h: one expert's hidden rows; dispatch: the routed rows grouped by expert)
  std::vector<float> logits, weights, y_slot, y_shared, g, u, h;
  MoeDispatchScratch dispatch;
};

// v grown (never shrunk) to at least n elements; returns its data.
template <class T>
T* scratch_of(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace ds
