// Tier keys (docs/kvcache.md, Tiers): what makes a tier entry safe to hand to another process.
//
// - The namespace covers the model fingerprint (config + tensor table, computed by the caller
//   from the checkpoint), the KV layout tag (dtype and kind of the model's paged caches), the block
//   size, the bytes per block and the entry format version. It is written into every entry header
//   and checked on read, and it names the Redis keys, so a tier never serves another model's or
//   layout's KV.
// - Entry keys are the pool's own prefix chain hashes (kvcache/prefix_hash.h). For entries to
//   survive restarts and be shared between servers the chain seed must be stable, yet still
//   unpredictable to clients (no crafted collisions, no probing another tenant by timing). So with
//   tiers on, the seed is derived from a secret (random bytes in a file created on first use,
//   mode 0600; servers that share a Redis share the file) mixed with the namespace. The
//   per-request salt still enters each key, so tenants stay isolated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds {

// Bump when the entry framing or the meaning of the bytes changes.
// 2: the writer's scope (salt tag, cache key) after the header. The version is part of the
// namespace, so entries of another version are never looked up (they age out by TTL or LRU).
inline constexpr uint32_t kTierFormatVersion = 2;

struct TierNamespaceSpec {
  uint64_t model_fingerprint = 0;
  std::string kv_layout;  // e.g. "deepseek_v3/mla/f32" (ModelRunner::kv_layout_tag())
  int32_t block_size_tokens = 0;
  int64_t block_bytes = 0;
};

uint64_t tier_namespace(const TierNamespaceSpec& spec);

// The prefix hash seed (KvCacheManagerConfig::process_seed) of a server with tiers.
uint64_t tier_prefix_seed(const std::vector<std::byte>& secret, uint64_t namespace_id);

// The secret in `path`, created (32 random bytes, O_EXCL, mode 0600) when absent; a concurrent
// creator wins and both read its bytes. io_error naming the path; invalid_argument when the file
// holds fewer than 16 bytes.
Result<std::vector<std::byte>> load_or_create_tier_secret(const std::string& path);

}  // namespace ds
