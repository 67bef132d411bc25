#include "transport/control_message.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
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
  bool raw(size_t n, std::string& v) {
    if (n > data_.size() - pos_) return false;
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

uint64_t KvGrant::block_bytes() const {
  uint64_t sum = 0;
  for (const RemotePageArray& a : arrays) sum += a.block_bytes;
  return sum;
}

namespace {

// The first of `ranges` (anything with .address and .bytes) holding [address, address + bytes).
template <class Range>
const Range* range_holding(const std::vector<Range>& ranges, uint64_t address, uint64_t bytes) {
  for (const Range& r : ranges)
    if (address >= r.address && bytes <= r.bytes && address - r.address <= r.bytes - bytes) return &r;
  return nullptr;
}

}  // namespace

const RemoteRegion* KvGrant::region_of(uint64_t address, uint64_t bytes) const {
  return range_holding(regions, address, bytes);
}

const SharedRange* KvGrant::shared_range_of(uint64_t address, uint64_t bytes) const {
  return range_holding(shared_ranges, address, bytes);
}

std::string encode_kv_grant(const KvGrant& grant) {
  std::string out;
  put_u32(out, static_cast<uint32_t>(grant.regions.size()));
  for (const RemoteRegion& r : grant.regions) {
    put_u64(out, r.address);
    put_u64(out, r.bytes);
    put_bytes(out, r.packed_rkey);
  }
  put_u32(out, static_cast<uint32_t>(grant.arrays.size()));
  for (const RemotePageArray& a : grant.arrays) {
    put_u64(out, a.address);
    put_u64(out, a.block_bytes);
  }
  put_u32(out, grant.n_blocks);
  put_u32(out, static_cast<uint32_t>(grant.block_ids.size()));
  for (uint32_t id : grant.block_ids) put_u32(out, id);
  put_u64(out, grant.state_page_bytes);
  put_u32(out, static_cast<uint32_t>(grant.state_pages.size()));
  for (uint64_t a : grant.state_pages) put_u64(out, a);
  put_u32(out, grant.shared ? 1 : 0);
  if (grant.shared) {
    put_u32(out, grant.shared->pid);
    put_u32(out, grant.shared->fd);
    put_u64(out, grant.shared->bytes);
    out.append(reinterpret_cast<const char*>(grant.shared->token.data()), grant.shared->token.size());
    put_u32(out, static_cast<uint32_t>(grant.shared_ranges.size()));
    for (const SharedRange& sr : grant.shared_ranges) {
      put_u64(out, sr.address);
      put_u64(out, sr.bytes);
      put_u64(out, sr.offset);
    }
  }
  return out;
}

Result<KvGrant> decode_kv_grant(std::string_view payload) {
  Reader r(payload);
  KvGrant g;
  // Every count is bounded by the payload's size before anything is allocated for it.
  const auto count = [&](uint32_t& n, size_t min_item_bytes) {
    return r.u32(n) && n <= payload.size() / min_item_bytes;
  };
  uint32_t n = 0;
  if (!count(n, 20)) return bad("kv_grant payload is malformed (regions)");
  g.regions.resize(n);
  for (RemoteRegion& reg : g.regions)
    if (!r.u64(reg.address) || !r.u64(reg.bytes) || !r.bytes(reg.packed_rkey))
      return bad("kv_grant payload is truncated (regions)");
  if (!count(n, 16)) return bad("kv_grant payload is malformed (arrays)");
  g.arrays.resize(n);
  for (RemotePageArray& a : g.arrays)
    if (!r.u64(a.address) || !r.u64(a.block_bytes)) return bad("kv_grant payload is truncated (arrays)");
  if (!r.u32(g.n_blocks) || !count(n, 4)) return bad("kv_grant payload is malformed (blocks)");
  g.block_ids.resize(n);
  for (uint32_t& id : g.block_ids)
    if (!r.u32(id)) return bad("kv_grant payload is truncated (blocks)");
  if (!r.u64(g.state_page_bytes) || !count(n, 8)) return bad("kv_grant payload is malformed (state pages)");
  g.state_pages.resize(n);
  for (uint64_t& a : g.state_pages)
    if (!r.u64(a)) return bad("kv_grant payload is truncated (state pages)");
  uint32_t has_shared = 0;
  if (!r.u32(has_shared) || has_shared > 1) return bad("kv_grant payload is malformed (shared segment)");
  if (has_shared == 1) {
    SharedSegmentRef& s = g.shared.emplace();
    std::string token;
    if (!r.u32(s.pid) || !r.u32(s.fd) || !r.u64(s.bytes) || !r.raw(s.token.size(), token))
      return bad("kv_grant payload is truncated (shared segment)");
    std::memcpy(s.token.data(), token.data(), s.token.size());
    if (!count(n, 24)) return bad("kv_grant payload is malformed (shared ranges)");
    g.shared_ranges.resize(n);
    for (SharedRange& sr : g.shared_ranges)
      if (!r.u64(sr.address) || !r.u64(sr.bytes) || !r.u64(sr.offset))
        return bad("kv_grant payload is truncated (shared ranges)");
  }
  if (!r.done()) return bad("kv_grant payload has trailing bytes");

  if (!g.block_ids.empty() && g.arrays.empty()) return bad("kv_grant names blocks but no page arrays");
  for (const RemotePageArray& a : g.arrays) {
    if (a.block_bytes == 0) return bad("kv_grant has a page array with a zero block size");
    if (g.n_blocks > 0 && (a.block_bytes > UINT64_MAX / g.n_blocks ||
                           g.region_of(a.address, a.block_bytes * g.n_blocks) == nullptr))
      return bad(fmt::format("kv_grant page array at {:#x} ({} blocks of {} bytes) lies outside every region",
                             a.address, g.n_blocks, a.block_bytes));
  }
  for (uint32_t id : g.block_ids)
    if (id >= g.n_blocks)
      return bad(fmt::format("kv_grant block {} is outside the {} blocks", id, g.n_blocks));
  for (const SharedRange& sr : g.shared_ranges)
    if (sr.offset > g.shared->bytes || sr.bytes > g.shared->bytes - sr.offset ||
        sr.address > UINT64_MAX - sr.bytes)
      return bad(fmt::format("kv_grant shared range at {:#x} lies outside the shared segment", sr.address));
  if (!g.state_pages.empty() && g.state_page_bytes < 8) return bad("kv_grant state pages are too small");
  for (uint64_t a : g.state_pages)
    if (g.region_of(a, g.state_page_bytes) == nullptr)
      return bad(fmt::format("kv_grant state page at {:#x} lies outside every region", a));
  return g;
}

}  // namespace ds::transport
