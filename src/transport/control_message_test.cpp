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

  // Two page arrays in one region (V3's layers), a second region for the state pages.
  KvGrant g;
  g.regions = {{0x7f0000000000ULL, 2 * 64 * 4096, std::string("rkey\0bytes", 10)},
               {0x7f0000800000ULL, 4 * 4096, "rkey2"}};
  g.arrays = {{0x7f0000000000ULL, 4096}, {0x7f0000000000ULL + 64 * 4096, 4096}};
  g.n_blocks = 64;
  g.block_ids = {3, 0, 63, 7};
  g.state_page_bytes = 4096;
  g.state_pages = {0x7f0000800000ULL + 4096, 0x7f0000800000ULL};
  // The pool's two arrays also lie in the decode side's shared segment (same-host writes), in two
  // allocations of its own.
  g.shared = SharedSegmentRef{.pid = 4321, .fd = 17, .bytes = (4 << 20) + 64 * 4096, .token = {}};
  g.shared_ranges = {{0x7f0000000000ULL, 64 * 4096, 4096},
                     {0x7f0000000000ULL + 64 * 4096, 64 * 4096, 4 << 20}};
  g.shared->token[0] = 0xAB;
  g.shared->token[31] = 0xCD;
  Result<KvGrant> gb = decode_kv_grant(encode_kv_grant(g));
  ASSERT_TRUE(gb.ok()) << gb.status().to_string();
  ASSERT_EQ(gb->regions.size(), 2u);
  EXPECT_EQ(gb->regions[0].packed_rkey, g.regions[0].packed_rkey);
  EXPECT_EQ(gb->arrays[1].address, g.arrays[1].address);
  EXPECT_EQ(gb->block_ids, g.block_ids);
  EXPECT_EQ(gb->state_pages, g.state_pages);
  ASSERT_TRUE(gb->shared.has_value());
  ASSERT_EQ(gb->shared_ranges.size(), 2u);
  EXPECT_EQ(gb->shared_ranges[1].offset, uint64_t{4} << 20);
  EXPECT_EQ(gb->shared_range_of(0x7f0000000000ULL + 64 * 4096 + 4096, 4096), &gb->shared_ranges[1]);
  EXPECT_EQ(gb->shared_range_of(0x7f0000000000ULL + 63 * 4096, 8192), nullptr);  // spans two allocations
  EXPECT_EQ(gb->shared->pid, 4321u);
  EXPECT_EQ(gb->shared->fd, 17u);
  EXPECT_EQ(gb->shared->bytes, g.shared->bytes);
  EXPECT_EQ(gb->shared->token, g.shared->token);
  EXPECT_EQ(gb->block_bytes(), 8192u);
  EXPECT_EQ(gb->region_of(0x7f0000800000ULL + 4096, 4096), &gb->regions[1]);
  EXPECT_EQ(gb->region_of(0x7f0000800000ULL + 3 * 4096 + 1, 4096), nullptr);

  const auto refused = [](const KvGrant& bad_grant) {
    return decode_kv_grant(encode_kv_grant(bad_grant)).status().code() == ErrorCode::transport_bad_message;
  };
  KvGrant outside = g;
  outside.block_ids.push_back(64);  // one past the arrays
  EXPECT_TRUE(refused(outside));
  KvGrant long_array = g;
  long_array.n_blocks = 65;  // the second array would run past its region
  EXPECT_TRUE(refused(long_array));
  KvGrant stray_state = g;
  stray_state.state_pages.push_back(0x7f0000800000ULL + 3 * 4096 + 1);
  EXPECT_TRUE(refused(stray_state));
  KvGrant past_segment = g;  // the second range would run past the segment's end
  past_segment.shared->bytes -= 1;
  EXPECT_TRUE(refused(past_segment));
  KvGrant no_arrays = g;
  no_arrays.arrays.clear();
  EXPECT_TRUE(refused(no_arrays));
  const std::string enc = encode_kv_grant(g);
  for (size_t cut = 0; cut < enc.size(); ++cut) EXPECT_FALSE(decode_kv_grant(enc.substr(0, cut)).ok()) << cut;
}

}  // namespace
}  // namespace ds::transport
