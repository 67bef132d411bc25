// vLLM's KV event wire format (vllm/distributed/kv_events.py; docs/kvcache.md, KV events), so a
// router built for vLLM (llm-d, Dynamo, SMG, our own `deepinfer route`) reads our events unchanged.
// A payload is one msgpack-encoded KVEventBatch, as msgspec writes it:
//   EventBatch  (array_like):  [ts: float64, events: [...]]  (+ data_parallel_rank when set)
//   BlockStored (tagged map):  {"type": "BlockStored", "block_hashes": [u64...], "parent_block_hash":
//                               u64 | nil, "token_ids": [int...], "block_size": int, "lora_id": nil,
//                               "medium": str, "lora_name": nil
//                               [, "extra_keys": [["salt_tag:<16 hex>"], nil, ...]]}
//   BlockRemoved:              {"type": "BlockRemoved", "block_hashes": [u64...], "medium": str}
//   AllBlocksCleared:          {"type": "AllBlocksCleared"}
// Hashes are the pool's chain hashes (ints, as vLLM's ExternalBlockHash allows); token_ids hold
// block_size tokens per stored block, so a router can index blocks by (parent, tokens) without our
// (secret-seeded) hash function. extra_keys (vLLM's per-block extra hash inputs, where it puts the
// request's cache_salt on block 0) is present only on a run that starts at position 0 of a salted
// request: its first entry is ["salt_tag:" + 16 lowercase hex digits of XXH3-64(salt)] — the tag,
// never the salt (docs/kvcache.md) — the others nil. Children of that block inherit the salt through
// the parent hash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvcache/kv_cache_manager.h"

namespace ds {

struct KvEventBatchFormat {
  int32_t block_size_tokens = 64;
  std::string medium = "CPU";  // where the pool lives (vLLM says "GPU" for its device pool)
  std::optional<int32_t> data_parallel_rank;
};

std::string encode_kv_event_batch(double ts_unix_s, std::span<const KvCacheEvent> events,
                                  const KvEventBatchFormat& format);

}  // namespace ds
