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
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::transport {

inline constexpr uint16_t kControlProtocolVersion = 2;  // 2: kv_grant carries state_blocks
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

// Where a request's KV goes: the decode side's registered region (address + packed UCX remote key)
// and the block ids it reserved, in sequence order.
struct KvGrant {
  uint64_t remote_address = 0;
  uint64_t region_bytes = 0;
  std::string packed_rkey;
  uint32_t block_bytes = 0;
  std::vector<uint32_t> block_ids;
  // The last state_blocks of block_ids receive the sequence state (V4: window rings, compressor
  // partial groups): a u64 byte count, then the bytes, across those blocks in order.
  uint32_t state_blocks = 0;
};
std::string encode_kv_grant(const KvGrant& grant);
Result<KvGrant> decode_kv_grant(std::string_view payload);

}  // namespace ds::transport
