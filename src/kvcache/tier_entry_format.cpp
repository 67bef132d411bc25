#include "kvcache/tier_entry_format.h"

#include <xxhash.h>

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
  uint32_t reserved;
  uint64_t payload_bytes;
  int64_t expires_at_unix_s;
};
static_assert(sizeof(Header) == kTierEntryHeaderBytes, "the header is packed by construction");

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kvcache_tier_corrupt, "kv tier entry: " + what);
}

}  // namespace

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
  const size_t token_bytes = entry.tokens.size() * sizeof(int32_t);
  std::vector<std::byte> out(sizeof(Header) + token_bytes + entry.bytes.size() + sizeof(uint64_t));
  std::byte* p = out.data();
  std::memcpy(p, &h, sizeof(h));
  p += sizeof(h);
  if (token_bytes > 0) std::memcpy(p, entry.tokens.data(), token_bytes);
  p += token_bytes;
  if (!entry.bytes.empty()) std::memcpy(p, entry.bytes.data(), entry.bytes.size());
  p += entry.bytes.size();
  const uint64_t checksum = XXH3_64bits(out.data(), static_cast<size_t>(p - out.data()));
  std::memcpy(p, &checksum, sizeof(checksum));
  return out;
}

Result<int64_t> peek_tier_entry_expiry(std::span<const std::byte> header) {
  if (header.size() < sizeof(Header)) return corrupt("truncated header");
  Header h{};
  std::memcpy(&h, header.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kTierFormatVersion) {
    return corrupt("bad magic or version");
  }
  return h.expires_at_unix_s;
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
  const uint64_t body = uint64_t{h.n_tokens} * sizeof(int32_t) + h.payload_bytes;
  if (h.n_tokens > (1u << 24) || h.payload_bytes > (uint64_t{1} << 40) ||
      bytes.size() != sizeof(Header) + body + sizeof(uint64_t)) {
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
  entry.tokens.resize(h.n_tokens);
  const std::byte* p = bytes.data() + sizeof(Header);
  if (h.n_tokens > 0) std::memcpy(entry.tokens.data(), p, h.n_tokens * sizeof(int32_t));
  p += h.n_tokens * sizeof(int32_t);
  entry.bytes.assign(p, p + h.payload_bytes);
  return entry;
}

}  // namespace ds
