#include "transport/control_message.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include <fmt/format.h>

namespace ds::transport {

namespace {

constexpr char kMagic[4] = {'D', 'S', 'K', 'V'};

// Little-endian writer/reader over a byte string (the reader refuses to run past the end).
void put_u16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes);
}

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool u16(uint16_t& v) { return uint_le(v); }
  bool u32(uint32_t& v) { return uint_le(v); }
  bool u64(uint64_t& v) { return uint_le(v); }
  bool bytes(std::string& v) {
    uint32_t n = 0;
    if (!u32(n) || n > data_.size() - pos_) return false;
    v.assign(data_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  template <class T>
  bool uint_le(T& v) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<T>(static_cast<T>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i));
    pos_ += sizeof(T);
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

std::array<unsigned char, kControlTagBytes> hmac_sha256(const SharedSecret& secret, std::string_view data) {
  std::array<unsigned char, kControlTagBytes> tag{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), tag.data(), &len);
  return tag;
}

Status bad(std::string message) { return {ErrorCode::transport_bad_message, std::move(message)}; }

bool known_type(uint16_t t) { return t >= 1 && t <= 5; }

}  // namespace

const char* control_type_name(ControlType type) {
  switch (type) {
    case ControlType::hello:
      return "hello";
    case ControlType::hello_accept:
      return "hello_accept";
    case ControlType::kv_grant:
      return "kv_grant";
    case ControlType::kv_written:
      return "kv_written";
    case ControlType::abort:
      return "abort";
  }
  return "?";
}

std::string encode_control_message(const ControlMessage& message, const SharedSecret& secret) {
  std::string out(kMagic, sizeof(kMagic));
  put_u16(out, kControlProtocolVersion);
  put_u16(out, static_cast<uint16_t>(message.type));
  put_u64(out, message.request_id);
  put_u32(out, static_cast<uint32_t>(message.payload.size()));
  out += message.payload;
  return seal_control_frame(std::move(out), secret);
}

std::string seal_control_frame(std::string body, const SharedSecret& secret) {
  const auto tag = hmac_sha256(secret, body);
  body.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return body;
}

Result<ControlMessage> decode_control_message(std::string_view frame, const SharedSecret& secret) {
  if (secret.empty()) return Status(ErrorCode::transport_auth_failed, "no shared secret configured");
  if (frame.size() < kControlHeaderBytes + kControlTagBytes)
    return bad(fmt::format("control message of {} bytes is shorter than a header and tag", frame.size()));
  if (std::memcmp(frame.data(), kMagic, sizeof(kMagic)) != 0) return bad("control message has a wrong magic");
  // Authenticate before trusting any field (the tag covers the header too).
  const std::string_view body = frame.substr(0, frame.size() - kControlTagBytes);
  const auto want = hmac_sha256(secret, body);
  if (CRYPTO_memcmp(want.data(), frame.data() + body.size(), kControlTagBytes) != 0)
    return Status(ErrorCode::transport_auth_failed,
                  "control message HMAC does not verify (another shared secret?)");
  Reader r(body.substr(sizeof(kMagic)));
  uint16_t version = 0, type = 0;
  uint64_t request_id = 0;
  uint32_t payload_bytes = 0;
  (void)r.u16(version);
  (void)r.u16(type);
  (void)r.u64(request_id);
  (void)r.u32(payload_bytes);
  if (version != kControlProtocolVersion)
    return Status(ErrorCode::transport_peer_mismatch,
                  fmt::format("peer speaks control protocol version {}, this build {}", version,
                              kControlProtocolVersion));
  if (!known_type(type)) return bad(fmt::format("unknown control message type {}", type));
  if (payload_bytes > kMaxControlPayloadBytes || payload_bytes != body.size() - kControlHeaderBytes)
    return bad(fmt::format("control message payload length {} disagrees with the frame", payload_bytes));
  return ControlMessage{static_cast<ControlType>(type), request_id,
                        std::string(body.substr(kControlHeaderBytes))};
}

std::string encode_peer_identity(const PeerIdentity& identity) {
  std::string out;
  put_bytes(out, identity.model_fingerprint);
  put_u64(out, identity.kv_layout_hash);
  return out;
}

Result<PeerIdentity> decode_peer_identity(std::string_view payload) {
  Reader r(payload);
  PeerIdentity id;
  if (!r.bytes(id.model_fingerprint) || !r.u64(id.kv_layout_hash) || !r.done())
    return bad("hello payload is malformed");
  return id;
}

Status check_peer_identity(const PeerIdentity& mine, const PeerIdentity& theirs) {
  if (mine.model_fingerprint != theirs.model_fingerprint)
    return {ErrorCode::transport_peer_mismatch,
            fmt::format("peer serves another model (fingerprint {} vs ours {})", theirs.model_fingerprint,
                        mine.model_fingerprint)};
  if (mine.kv_layout_hash != theirs.kv_layout_hash)
    return {ErrorCode::transport_peer_mismatch,
            fmt::format("peer has another KV layout (hash {:016x} vs ours {:016x})", theirs.kv_layout_hash,
                        mine.kv_layout_hash)};
  return ok_status();
}

std::string encode_kv_grant(const KvGrant& grant) {
  std::string out;
  put_u64(out, grant.remote_address);
  put_u64(out, grant.region_bytes);
  put_bytes(out, grant.packed_rkey);
  put_u32(out, grant.block_bytes);
  put_u32(out, static_cast<uint32_t>(grant.block_ids.size()));
  for (uint32_t id : grant.block_ids) put_u32(out, id);
  put_u32(out, grant.state_blocks);
  return out;
}

Result<KvGrant> decode_kv_grant(std::string_view payload) {
  Reader r(payload);
  KvGrant g;
  uint32_t n = 0;
  if (!r.u64(g.remote_address) || !r.u64(g.region_bytes) || !r.bytes(g.packed_rkey) ||
      !r.u32(g.block_bytes) || !r.u32(n) || n > payload.size() / 4)
    return bad("kv_grant payload is malformed");
  g.block_ids.resize(n);
  for (uint32_t& id : g.block_ids)
    if (!r.u32(id)) return bad("kv_grant payload is truncated");
  if (!r.u32(g.state_blocks)) return bad("kv_grant payload is truncated");
  if (!r.done()) return bad("kv_grant payload has trailing bytes");
  if (g.state_blocks > g.block_ids.size()) return bad("kv_grant has more state blocks than blocks");
  if (g.block_bytes == 0) return bad("kv_grant has a zero block size");
  for (uint32_t id : g.block_ids)
    if ((static_cast<uint64_t>(id) + 1) * g.block_bytes > g.region_bytes)
      return bad(fmt::format("kv_grant block {} lies outside the {}-byte region", id, g.region_bytes));
  return g;
}

}  // namespace ds::transport
