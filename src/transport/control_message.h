// Control messages between P/D peers (issue 15, ARCHITECTURE `src/transport`): typed, versioned
// and authenticated, so a peer with another secret, protocol version, model or KV layout is refused
// before any KV page moves.
//
// Wire layout (little-endian), then an HMAC-SHA256 tag of everything before it with the shared
// secret:
//   magic "DSKV" | u16 version | u16 type | u64 request_id | u32 payload_bytes | payload | tag[32]
// The payload's shape is the message type's (see the encode_/decode_ helpers below).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "transport/shared_pages.h"

namespace ds::transport {

// 2: kv_grant carries state_blocks; 3: kv_grant names the decode side's pool pages (no landing region);
// 4: kv_grant names the decode side's shared segment (same-host writes, shared_pages.h).
inline constexpr uint16_t kControlProtocolVersion = 4;
inline constexpr size_t kControlHeaderBytes = 4 + 2 + 2 + 8 + 4;
inline constexpr size_t kControlTagBytes = 32;
// Control messages carry ids and keys, never KV data: a bigger frame is refused unread.
inline constexpr size_t kMaxControlPayloadBytes = 1 << 20;

enum class ControlType : uint16_t {
  hello = 1,         // PeerIdentity: who I am (first message each way)
  hello_accept = 2,  // PeerIdentity of the acceptor
  kv_grant = 3,      // KvGrant: where to write a request's KV pages (decode -> prefill)
  kv_written = 4,    // the pages of request_id are written and flushed (prefill -> decode)
  abort = 5,         // request_id is cancelled or failed; payload: a reason
};
const char* control_type_name(ControlType type);

struct ControlMessage {
  ControlType type = ControlType::hello;
  uint64_t request_id = 0;
  std::string payload;
};

// The secret both peers were started with (`--kv-transfer-secret-file`); empty is refused.
using SharedSecret = std::string;

std::string encode_control_message(const ControlMessage& message, const SharedSecret& secret);
// Appends the HMAC tag to a header + payload (encode_control_message's last step).
std::string seal_control_frame(std::string body, const SharedSecret& secret);
// Refuses: a short or oversized frame, another magic or version, an unknown type, a payload length
// that disagrees with the frame, a tag that does not verify (constant-time compare).
Result<ControlMessage> decode_control_message(std::string_view frame, const SharedSecret& secret);

// Hello payload: the model fingerprint (config + weights identity) and the KV layout hash (block
// size, dtypes, per-layer cache shapes). Peers must agree on both.
struct PeerIdentity {
  std::string model_fingerprint;
  uint64_t kv_layout_hash = 0;
};
std::string encode_peer_identity(const PeerIdentity& identity);
Result<PeerIdentity> decode_peer_identity(std::string_view payload);
// ok, or transport_peer_mismatch naming what differs.
Status check_peer_identity(const PeerIdentity& mine, const PeerIdentity& theirs);

// A range of the decode side's memory registered for one-sided puts (address + packed UCX remote key).
struct RemoteRegion {
  uint64_t address = 0;
  uint64_t bytes = 0;
  std::string packed_rkey;
};
// One array of KV pages on the decode side (its pool's storage of one cache kind and layer):
// block b's page is block_bytes bytes at address + b·block_bytes.
struct RemotePageArray {
  uint64_t address = 0;
  uint64_t block_bytes = 0;
};

// Where a request's KV goes: straight into the decode side's pool. A block's bytes (the model's
// export_kv_block order) are its page in each array in turn; block_ids are the decode side's pool
// blocks for the request's blocks, in sequence order. Every page the grant names lies inside one
// of the regions (checked by decode_kv_grant).
struct KvGrant {
  std::vector<RemoteRegion> regions;
  std::vector<RemotePageArray> arrays;
  uint32_t n_blocks = 0;  // the arrays' length: every block id is below it
  std::vector<uint32_t> block_ids;
  // The sequence state (V4: window rings, compressor partial groups): a u64 byte count, then the
  // bytes, across pages of state_page_bytes at these addresses in order (none for V3).
  uint64_t state_page_bytes = 0;
  std::vector<uint64_t> state_pages;
  // The decode side's shared segment, for a prefill server on the same host (shared_pages.h): a
  // page inside one of shared_ranges may be written there with memcpy instead of a UCX put.
  std::optional<SharedSegmentRef> shared;
  std::vector<SharedRange> shared_ranges;

  // Bytes of one block (the sum of the arrays' block_bytes).
  uint64_t block_bytes() const;
  // The region holding [address, address + bytes), or null.
  const RemoteRegion* region_of(uint64_t address, uint64_t bytes) const;
  // The shared range holding [address, address + bytes), or null.
  const SharedRange* shared_range_of(uint64_t address, uint64_t bytes) const;
};
std::string encode_kv_grant(const KvGrant& grant);
Result<KvGrant> decode_kv_grant(std::string_view payload);

}  // namespace ds::transport
