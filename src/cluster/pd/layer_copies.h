// LayerCopies: a prefill server's KvLayerSink for one transfer (docs/pd.md, "Layer by layer"): as each
// layer of its prefill ends, the layer's pages of the granted blocks that forward completed are copied
// out of this server's pool at once —
//   - same host (the decode server's pool mapped here): straight into the decode server's pool blocks;
//   - otherwise: into this transfer slot's registered layer buffer, each copy recorded as a put the
//     transfer thread issues on its next poll (take_staged); a page that no longer fits in the buffer
//     is left to the outbox path.
// Either way nothing waits for a chunk's blocks to reach the outbox: the outbox only supplies what this
// server did not copy (its prefix-cache hits, what did not fit). Thread-safe: the engine's forward
// thread copies, the transfer thread takes the staged puts, asks what is complete and closes it when the
// transfer ends (no copy lands after that).
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
  // A put of `bytes` at `offset` of the layer buffer to the decode server's `remote` address.
  struct StagedPut {
    size_t offset = 0;
    size_t bytes = 0;
    uint64_t remote = 0;
    size_t array = 0;  // the page array (a run never spans two)
  };
  // `local`: this server's pool page arrays (Engine::kv_page_arrays), in the grant's array order. The
  // grant covers the request's blocks [first_granted, first_granted + grant.block_ids.size()).
  // `mapping`: the decode server's pool mapped here, or null: the pages go through `layer_buffer`.
  LayerCopies(std::vector<KvPageArray> local, const transport::KvGrant& grant,
              std::shared_ptr<const transport::SharedPageMapping> mapping, std::span<std::byte> layer_buffer,
              int64_t first_granted);
  // Whether the local arrays match the grant's (count, page sizes, a layer each) and, same host, every
  // granted page lies in the mapped segment (else a layer buffer is needed).
  bool usable() const { return usable_; }
  bool staged() const { return mapping_ == nullptr; }

  void layer_done(int layer, int64_t first_block, std::span<const int32_t> pool_ids) override;
  // The puts recorded since the last call (staged mode), consecutive pages of a layer merged.
  std::vector<StagedPut> take_staged();
  // Granted block g (an index into grant.block_ids) has every page array copied (staged: and its
  // puts recorded; they are issued by the transfer thread before its final flush).
  bool complete(size_t g) const;
  int64_t bytes() const;
  // No copy after this returns; the mapping is let go (the engine may keep this sink a while).
  void close();

 private:
  const std::vector<KvPageArray> local_;
  const transport::KvGrant grant_;  // a copy: the engine may hold this sink after the transfer
  std::shared_ptr<const transport::SharedPageMapping> mapping_;  // dropped by close()
  const std::span<std::byte> buffer_;
  const int64_t first_granted_;
  bool usable_ = false;
  std::vector<uint64_t> remote_;    // [granted block][array]: the page's decode-side address
  std::vector<std::byte*> mapped_;  // [granted block][array]: the page in the mapping (same host)
  mutable std::mutex mu_;
  bool closed_ = false;                // guarded by mu_
  std::vector<uint8_t> copied_;        // [granted block][array], guarded by mu_
  std::vector<size_t> arrays_copied_;  // [granted block], guarded by mu_
  int64_t bytes_ = 0;                  // guarded by mu_
  size_t buffer_used_ = 0;             // guarded by mu_
  std::vector<StagedPut> staged_;      // guarded by mu_
};

}  // namespace ds::pd
