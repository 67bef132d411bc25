// The bytes of one tier entry, shared by every tier (an SSD file's contents, a Redis value):
//
//   header (72 bytes, little-endian)
//     magic "DSKVBLK\0" | u32 format version | u32 header bytes | u64 namespace | u64 key |
//     u64 prev_key | u32 n_tokens | u32 scope key bytes | u64 payload bytes | i64 expires_at_unix_s |
//     u64 scope salt tag
//   scope key | i32 tokens[n_tokens] | payload | u64 XXH3-64 of everything before it
//
// The scope (who wrote it) comes right after the header, so a scan reads kTierEntryPeekBytes at
// most to know an entry's expiry and scope.
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

inline constexpr size_t kTierEntryHeaderBytes = 72;
inline constexpr size_t kTierEntryPeekBytes = kTierEntryHeaderBytes + kMaxTierScopeKeyBytes;

std::vector<std::byte> encode_tier_entry(uint64_t namespace_id, const TierEntry& entry);

struct TierEntryMeta {
  int64_t expires_at_unix_s = 0;
  TierScope scope;
};
// The expiry and scope from an entry's first bytes (at least kTierEntryHeaderBytes; the scope needs
// the header's scope key bytes after it, so read min(kTierEntryPeekBytes, size)); the start-up scan
// and remove_matching read only these. kvcache_tier_corrupt when they are not a header of this
// format or are cut short. Not a full check.
Result<TierEntryMeta> peek_tier_entry(std::span<const std::byte> head);

// kvcache_tier_corrupt naming the failed check.
Result<TierEntry> decode_tier_entry(uint64_t namespace_id, uint64_t expected_key,
                                    std::span<const std::byte> bytes);

}  // namespace ds
