// The bytes of one tier entry, shared by every tier (an SSD file's contents, a Redis value):
//
//   header (64 bytes, little-endian)
//     magic "DSKVBLK\0" | u32 format version | u32 header bytes | u64 namespace | u64 key |
//     u64 prev_key | u32 n_tokens | u32 0 | u64 payload bytes | i64 expires_at_unix_s
//   i32 tokens[n_tokens] | payload | u64 XXH3-64 of everything before it
//
// decode_tier_entry() checks every field against what the reader expects (namespace, key,
// lengths, checksum): a truncated, flipped or foreign entry is kvcache_tier_corrupt, never data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_tier.h"

namespace ds {

inline constexpr size_t kTierEntryHeaderBytes = 64;

std::vector<std::byte> encode_tier_entry(uint64_t namespace_id, const TierEntry& entry);

// The expiry in an entry's first kTierEntryHeaderBytes bytes (the start-up scan reads only these);
// kvcache_tier_corrupt when they are not a header of this format. Not a full check.
Result<int64_t> peek_tier_entry_expiry(std::span<const std::byte> header);

// kvcache_tier_corrupt naming the failed check.
Result<TierEntry> decode_tier_entry(uint64_t namespace_id, uint64_t expected_key,
                                    std::span<const std::byte> bytes);

}  // namespace ds
