// LayerCopies: a prefill server's KvLayerSink for one transfer to a same-host decode server whose
// pool it has mapped (docs/pd.md, "Same-host shared memory"): as each layer of its prefill ends, the
// layer's pages of the granted blocks that forward completed are copied from this server's pool
// straight into the decode server's pool blocks — no outbox copy, and nothing left to write once
// the prefill is over but the blocks it did not compute (its own prefix-cache hits) and the state.
// Thread-safe: the engine's forward thread copies, the transfer thread asks what is complete and
// closes it when the transfer ends (no copy lands after that).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "engine/engine.h"  // KvPageArray (Engine::kv_page_arrays)
#include "engine/kv_layer_sink.h"
#include "transport/control_message.h"
#include "transport/shared_pages.h"

namespace ds::pd {

class LayerCopies final : public KvLayerSink {
 public:
  // `local`: this server's pool page arrays (Engine::kv_page_arrays), in the grant's array order.
  // The grant covers the request's blocks [first_granted, first_granted + grant.block_ids.size()).
  LayerCopies(std::vector<KvPageArray> local, const transport::KvGrant& grant,
              std::shared_ptr<const transport::SharedPageMapping> mapping, int64_t first_granted);
  // Whether the local arrays match the grant's (count, page sizes, a layer each) and every granted
  // page lies in the mapped segment: only then can the copies stand in for the writes.
  bool usable() const { return usable_; }

  void layer_done(int layer, int64_t first_block, std::span<const int32_t> pool_ids) override;
  // Granted block g (an index into grant.block_ids) has every page array copied.
  bool complete(size_t g) const;
  int64_t bytes() const;
  // No copy after this returns; the mapping is let go (the engine may keep this sink a while).
  void close();

 private:
  std::byte* destination(size_t array, size_t g) const;

  const std::vector<KvPageArray> local_;
  const transport::KvGrant grant_;  // a copy: the engine may hold this sink after the transfer
  std::shared_ptr<const transport::SharedPageMapping> mapping_;  // dropped by close()
  const int64_t first_granted_;
  bool usable_ = false;
  mutable std::mutex mu_;
  bool closed_ = false;                // guarded by mu_
  std::vector<uint8_t> copied_;        // [granted block][array], guarded by mu_
  std::vector<size_t> arrays_copied_;  // [granted block], guarded by mu_
  int64_t bytes_ = 0;                  // guarded by mu_
};

}  // namespace ds::pd
