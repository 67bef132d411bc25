// KvLayerSink: a writer outside the engine that copies a request's prompt pages layer by layer as
// its prefill computes them (P/D's prefill server writing into a same-host decode server's pool,
// docs/pd.md). During a forward, after each main layer (ModelRunner::set_kv_layer_done), the
// engine tells the request's sink which of its blocks the forward completed and where they are in
// the pool; the model's page arrays of that layer (KvPageArray::layer) then hold their final rows.
#pragma once

#include <cstdint>
#include <span>

namespace ds {

class KvLayerSink {
 public:
  virtual ~KvLayerSink() = default;
  // Layer `layer`'s pages of the request's blocks [first_block, first_block + pool_ids.size()) hold
  // their final rows, in pool blocks pool_ids. On the forward's thread, inside the forward: copy,
  // never block, never call into the engine. A block may be reported again (a recomputed prefill).
  virtual void layer_done(int layer, int64_t first_block, std::span<const int32_t> pool_ids) = 0;
};

}  // namespace ds
