// Decoding a worker's KV event batch: vLLM's wire format (vllm/distributed/kv_events.py), as
// `deepinfer serve --kv-events-endpoint` publishes it (docs/kvcache.md, KV events):
//   batch:  msgpack array [ts: float, events: [...]] (+ data_parallel_rank)
//   event:  a msgspec tagged map {"type": "BlockStored" | "BlockRemoved" | "AllBlocksCleared", ...}
// Only what the router uses is kept: the worker's block hashes (opaque keys: the engine seeds them
// per process, so the router never recomputes them), the parent's hash, and the token ids of the
// stored blocks, which the router hashes itself. Unknown event types and fields are skipped (newer
// publishers add them); a payload that is not valid msgpack or misses a field is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::cluster {

struct WorkerKvEvent {
  enum class Kind { stored, removed, all_cleared };
  Kind kind = Kind::all_cleared;
  std::vector<uint64_t> block_hashes;   // the worker's keys (a bytes hash is folded into 64 bits)
  std::optional<uint64_t> parent_hash;  // stored: the block before the first one; none at position 0
  std::vector<int32_t> token_ids;       // stored: block_size ids per block, in order
  int32_t block_size = 0;               // stored
  // stored at position 0: the salt tag from extra_keys[0] ("salt_tag:<16 hex>"), none when unsalted
  std::optional<uint64_t> salt_tag;
};

struct WorkerKvEventBatch {
  double ts_unix_s = 0;
  std::vector<WorkerKvEvent> events;
};

// invalid_argument naming what is wrong.
Result<WorkerKvEventBatch> decode_kv_event_batch(std::string_view payload);

}  // namespace ds::cluster
