#include "kvcache/tier_entry_format.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "kvcache/tier_key.h"

namespace ds {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'K', 'V', 'B', 'L', 'K', '\0'};

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t namespace_id;
  uint64_t key;
  uint64_t prev_key;
  uint32_t n_tokens;
  uint32_t scope_key_bytes;
  uint64_t payload_bytes;
  int64_t expires_at_unix_s;
  uint64_t scope_salt_tag;
};
static_assert(sizeof(Header) == kTierEntryHeaderBytes, "the header is packed by construction");

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kvcache_tier_corrupt, "kv tier entry: " + what);
}

}  // namespace

void TierLatencyCounts::add(int64_t ns) {
  const double s = static_cast<double>(ns) * 1e-9;
  const auto bucket =
      static_cast<size_t>(std::lower_bound(kTierLatencyBoundsS.begin(), kTierLatencyBoundsS.end(), s) -
                          kTierLatencyBoundsS.begin());
  ++counts[bucket];
  sum_ns += ns;
}

uint64_t tier_salt_tag(std::string_view salt) { return XXH3_64bits(salt.data(), salt.size()); }

bool TierScopeFilter::matches(const TierScope& scope) const {
  if (salt_tag.has_value() && *salt_tag != scope.salt_tag) return false;
  if (key_prefix.has_value() && !scope.cache_key.starts_with(*key_prefix)) return false;
  return true;
}

std::vector<std::byte> encode_tier_entry(uint64_t namespace_id, const TierEntry& entry) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kTierFormatVersion;
  h.header_bytes = sizeof(Header);
  h.namespace_id = namespace_id;
  h.key = entry.key;
  h.prev_key = entry.prev_key;
  h.n_tokens = static_cast<uint32_t>(entry.tokens.size());
  h.payload_bytes = entry.bytes.size();
  h.expires_at_unix_s = entry.expires_at_unix_s;
  const size_t key_bytes = std::min(entry.scope.cache_key.size(), kMaxTierScopeKeyBytes);
  h.scope_key_bytes = static_cast<uint32_t>(key_bytes);
  h.scope_salt_tag = entry.scope.salt_tag;
  const size_t token_bytes = entry.tokens.size() * sizeof(int32_t);
  std::vector<std::byte> out(sizeof(Header) + key_bytes + token_bytes + entry.bytes.size() +
                             sizeof(uint64_t));
  std::byte* p = out.data();
  std::memcpy(p, &h, sizeof(h));
  p += sizeof(h);
  if (key_bytes > 0) std::memcpy(p, entry.scope.cache_key.data(), key_bytes);
  p += key_bytes;
  if (token_bytes > 0) std::memcpy(p, entry.tokens.data(), token_bytes);
  p += token_bytes;
  if (!entry.bytes.empty()) std::memcpy(p, entry.bytes.data(), entry.bytes.size());
  p += entry.bytes.size();
  const uint64_t checksum = XXH3_64bits(out.data(), static_cast<size_t>(p - out.data()));
  std::memcpy(p, &checksum, sizeof(checksum));
  return out;
}

Result<TierEntryMeta> peek_tier_entry(std::span<const std::byte> head) {
  if (head.size() < sizeof(Header)) return corrupt("truncated header");
  Header h{};
  std::memcpy(&h, head.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kTierFormatVersion ||
      h.header_bytes != sizeof(Header)) {
    return corrupt("bad magic or version");
  }
  if (h.scope_key_bytes > kMaxTierScopeKeyBytes || head.size() < sizeof(Header) + h.scope_key_bytes)
    return corrupt("truncated scope");
  TierEntryMeta meta;
  meta.expires_at_unix_s = h.expires_at_unix_s;
  meta.scope.salt_tag = h.scope_salt_tag;
  meta.scope.cache_key.assign(reinterpret_cast<const char*>(head.data() + sizeof(Header)), h.scope_key_bytes);
  return meta;
}

Result<TierEntry> decode_tier_entry(uint64_t namespace_id, uint64_t expected_key,
                                    std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(Header) + sizeof(uint64_t)) {
    return corrupt("truncated: " + std::to_string(bytes.size()) + " bytes");
  }
  Header h{};
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return corrupt("bad magic");
  if (h.version != kTierFormatVersion || h.header_bytes != sizeof(Header)) {
    return corrupt("format version " + std::to_string(h.version) + ", expected " +
                   std::to_string(kTierFormatVersion));
  }
  if (h.namespace_id != namespace_id) return corrupt("written for another model, layout or block size");
  if (h.key != expected_key) return corrupt("key does not match its name");
  const uint64_t body =
      uint64_t{h.scope_key_bytes} + uint64_t{h.n_tokens} * sizeof(int32_t) + h.payload_bytes;
  if (h.n_tokens > (1u << 24) || h.payload_bytes > (uint64_t{1} << 40) ||
      h.scope_key_bytes > kMaxTierScopeKeyBytes || bytes.size() != sizeof(Header) + body + sizeof(uint64_t)) {
    return corrupt("length " + std::to_string(bytes.size()) + " does not match its header");
  }
  const size_t checked_bytes = bytes.size() - sizeof(uint64_t);
  uint64_t checksum = 0;
  std::memcpy(&checksum, bytes.data() + checked_bytes, sizeof(checksum));
  if (XXH3_64bits(bytes.data(), checked_bytes) != checksum) return corrupt("checksum mismatch");
  TierEntry entry;
  entry.key = h.key;
  entry.prev_key = h.prev_key;
  entry.expires_at_unix_s = h.expires_at_unix_s;
  entry.scope.salt_tag = h.scope_salt_tag;
  const std::byte* p = bytes.data() + sizeof(Header);
  entry.scope.cache_key.assign(reinterpret_cast<const char*>(p), h.scope_key_bytes);
  p += h.scope_key_bytes;
  entry.tokens.resize(h.n_tokens);
  if (h.n_tokens > 0) std::memcpy(entry.tokens.data(), p, h.n_tokens * sizeof(int32_t));
  p += h.n_tokens * sizeof(int32_t);
  entry.bytes.assign(p, p + h.payload_bytes);
  return entry;
}

}  // namespace ds
