// Control messages: round trips, and every way a frame can be wrong is refused with its own code.
#include "transport/control_message.h"

#include <gtest/gtest.h>

#include <random>

namespace ds::transport {
namespace {

const SharedSecret kSecret = "s3cret-shared-by-both-peers";

TEST(ControlMessage, RoundTripsEveryType) {
  for (ControlType type : {ControlType::hello, ControlType::hello_accept, ControlType::kv_grant,
                           ControlType::kv_written, ControlType::abort}) {
    const ControlMessage m{type, 0x0123456789abcdefULL, std::string("pay\0load", 8)};
    Result<ControlMessage> got = decode_control_message(encode_control_message(m, kSecret), kSecret);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->type, type);
    EXPECT_EQ(got->request_id, m.request_id);
    EXPECT_EQ(got->payload, m.payload);
  }
}

TEST(ControlMessage, AnotherSecretOrAnyFlippedBitIsRefused) {
  const std::string frame = encode_control_message({ControlType::kv_written, 7, "abc"}, kSecret);
  EXPECT_EQ(decode_control_message(frame, "other").status().code(), ErrorCode::transport_auth_failed);
  EXPECT_EQ(decode_control_message(frame, "").status().code(), ErrorCode::transport_auth_failed);
  for (size_t i = 4; i < frame.size(); ++i) {  // after the magic: the tag catches every byte
    std::string bad = frame;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_EQ(decode_control_message(bad, kSecret).status().code(), ErrorCode::transport_auth_failed) << i;
  }
  std::string bad_magic = frame;
  bad_magic[0] = 'X';
  EXPECT_EQ(decode_control_message(bad_magic, kSecret).status().code(), ErrorCode::transport_bad_message);
  EXPECT_EQ(decode_control_message(frame.substr(0, 20), kSecret).status().code(),
            ErrorCode::transport_bad_message);
}

// A correctly signed frame whose header carries something this build refuses.
std::string forged(uint16_t version, uint16_t type, uint32_t claimed_payload, const std::string& payload) {
  std::string body = encode_control_message({ControlType::abort, 1, payload}, kSecret);
  body.resize(body.size() - kControlTagBytes);
  body[4] = static_cast<char>(version & 0xff);
  body[5] = static_cast<char>(version >> 8);
  body[6] = static_cast<char>(type & 0xff);
  body[7] = static_cast<char>(type >> 8);
  for (int i = 0; i < 4; ++i) body[16 + i] = static_cast<char>(claimed_payload >> (8 * i));
  return seal_control_frame(std::move(body), kSecret);
}

TEST(ControlMessage, VersionTypeAndLengthAreCheckedAfterAuthentication) {
  constexpr uint16_t v = kControlProtocolVersion;
  EXPECT_TRUE(decode_control_message(forged(v, 5, 3, "abc"), kSecret).ok());
  for (const uint16_t other : {uint16_t(v - 1), uint16_t(v + 1)})  // an older or newer build
    EXPECT_EQ(decode_control_message(forged(other, 5, 3, "abc"), kSecret).status().code(),
              ErrorCode::transport_peer_mismatch);
  EXPECT_EQ(decode_control_message(forged(v, 99, 3, "abc"), kSecret).status().code(),
            ErrorCode::transport_bad_message);
  EXPECT_EQ(decode_control_message(forged(v, 5, 4, "abc"), kSecret).status().code(),
            ErrorCode::transport_bad_message);
}

TEST(ControlMessage, PeerIdentityAndGrantPayloads) {
  const PeerIdentity a{"deepseek_v3:abcd", 42};
  Result<PeerIdentity> back = decode_peer_identity(encode_peer_identity(a));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(check_peer_identity(a, *back).ok());
  EXPECT_EQ(check_peer_identity(a, {"deepseek_v4:ffff", 42}).code(), ErrorCode::transport_peer_mismatch);
  EXPECT_EQ(check_peer_identity(a, {"deepseek_v3:abcd", 43}).code(), ErrorCode::transport_peer_mismatch);
  EXPECT_FALSE(decode_peer_identity("xx").ok());

  const KvGrant g{0x7f0000001000ULL, 64 * 4096, std::string("rkey\0bytes", 10), 4096, {3, 0, 63, 7}, 1};
  Result<KvGrant> gb = decode_kv_grant(encode_kv_grant(g));
  ASSERT_TRUE(gb.ok()) << gb.status().to_string();
  EXPECT_EQ(gb->remote_address, g.remote_address);
  EXPECT_EQ(gb->packed_rkey, g.packed_rkey);
  EXPECT_EQ(gb->block_ids, g.block_ids);
  EXPECT_EQ(gb->state_blocks, 1u);
  KvGrant too_many = g;
  too_many.state_blocks = 5;  // more than the 4 blocks
  EXPECT_EQ(decode_kv_grant(encode_kv_grant(too_many)).status().code(), ErrorCode::transport_bad_message);
  KvGrant outside = g;
  outside.block_ids.push_back(64);  // one past the region
  EXPECT_EQ(decode_kv_grant(encode_kv_grant(outside)).status().code(), ErrorCode::transport_bad_message);
  const std::string enc = encode_kv_grant(g);
  for (size_t cut = 0; cut < enc.size(); ++cut) EXPECT_FALSE(decode_kv_grant(enc.substr(0, cut)).ok()) << cut;
}

}  // namespace
}  // namespace ds::transport
