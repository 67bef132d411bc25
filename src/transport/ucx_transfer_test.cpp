// UCX for real over loopback (issue 15's transport): a "decode" thread registers a region and
// grants blocks, a "prefill" thread puts pages into them one-sided; the bytes arrive exactly, in
// the granted blocks only. Handshakes with another secret or another model are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "transport/control_message.h"
#include "transport/registered_memory.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"

namespace ds::transport {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

Deadline in(int s) { return steady_clock::now() + seconds(s); }

constexpr uint32_t kBlockBytes = 4096;
constexpr uint32_t kBlocks = 64;
const PeerIdentity kModel{"deepseek_v3:tiny:0001", 0x1234};

struct DecodeResult {
  Status status;
  std::vector<uint8_t> region;
};

// The decode side: listen, check the peer's hello, grant blocks, wait for kv_written.
DecodeResult run_decode(UcxWorker& w, const std::vector<uint32_t>& granted) {
  DecodeResult r;
  r.region.assign(size_t{kBlocks} * kBlockBytes, 0xEE);
  auto fail = [&](Status s) {
    r.status = std::move(s);
    return std::move(r);
  };
  Result<std::unique_ptr<RegisteredMemory>> mem = w.register_memory(r.region.data(), r.region.size());
  if (!mem.ok()) return fail(mem.status());
  Result<std::unique_ptr<UcxEndpoint>> ep = w.accept(in(20));
  if (!ep.ok()) return fail(ep.status());
  Result<std::string> frame = w.receive(in(20));
  if (!frame.ok()) return fail(frame.status());
  // A refused peer is told why (an abort it can authenticate only with the right secret).
  const auto check_hello = [&]() -> Status {
    DS_ASSIGN_OR_RETURN(ControlMessage hello, decode_control_message(*frame, "secret"));
    DS_ASSIGN_OR_RETURN(PeerIdentity who, decode_peer_identity(hello.payload));
    return check_peer_identity(kModel, who);
  };
  if (Status s = check_hello(); !s.ok()) {
    (void)(*ep)->send(encode_control_message({ControlType::abort, 0, s.message()}, "secret"), in(5));
    return fail(s);
  }
  KvGrant grant;
  grant.regions = {{(*mem)->address(), (*mem)->bytes(), (*mem)->packed_rkey()}};
  grant.arrays = {{(*mem)->address(), kBlockBytes}};
  grant.n_blocks = kBlocks;
  grant.block_ids = granted;
  if (Status s = (*ep)->send(
          encode_control_message({ControlType::kv_grant, 9, encode_kv_grant(grant)}, "secret"), in(20));
      !s.ok())
    return fail(s);
  Result<std::string> done = w.receive(in(20));
  if (!done.ok()) return fail(done.status());
  Result<ControlMessage> written = decode_control_message(*done, "secret");
  if (!written.ok()) return fail(written.status());
  if (written->type != ControlType::kv_written || written->request_id != 9)
    return fail({ErrorCode::transport_bad_message, "expected kv_written for request 9"});
  return r;
}

// The prefill side: connect, hello, take the grant, put one page per granted block, flush, done.
Status run_prefill(UcxWorker& w, uint16_t port, const std::string& secret, const PeerIdentity& me,
                   const std::vector<std::vector<uint8_t>>& pages) {
  DS_ASSIGN_OR_RETURN(std::unique_ptr<UcxEndpoint> ep, w.connect("127.0.0.1", port));
  DS_TRY(ep->send(encode_control_message({ControlType::hello, 0, encode_peer_identity(me)}, secret), in(20)));
  DS_ASSIGN_OR_RETURN(std::string frame, w.receive(in(20)));
  DS_ASSIGN_OR_RETURN(ControlMessage m, decode_control_message(frame, secret));
  if (m.type == ControlType::abort) return {ErrorCode::transport_peer_mismatch, "refused: " + m.payload};
  DS_ASSIGN_OR_RETURN(KvGrant grant, decode_kv_grant(m.payload));
  DS_ASSIGN_OR_RETURN(RemoteKey key, ep->unpack_remote_key(grant.regions.at(0).packed_rkey));
  for (size_t i = 0; i < grant.block_ids.size(); ++i)
    DS_TRY(ep->put(pages[i].data(), pages[i].size(),
                   grant.arrays.at(0).address + uint64_t{grant.block_ids[i]} * kBlockBytes, key));
  DS_TRY(ep->flush(in(20)));
  return ep->send(encode_control_message({ControlType::kv_written, m.request_id, ""}, secret), in(20));
}

TEST(UcxTransfer, PagesLandInTheGrantedBlocksExactly) {
  Result<std::unique_ptr<UcxWorker>> decode = UcxWorker::create();
  ASSERT_TRUE(decode.ok()) << decode.status().to_string();
  ASSERT_TRUE((*decode)->listen("127.0.0.1", 0).ok());
  const uint16_t port = (*decode)->listen_port();
  ASSERT_NE(port, 0);
  const std::vector<uint32_t> granted = {5, 0, 63, 17, 18};
  std::mt19937 rng(7);
  std::vector<std::vector<uint8_t>> pages(granted.size(), std::vector<uint8_t>(kBlockBytes));
  for (auto& p : pages)
    for (auto& b : p) b = static_cast<uint8_t>(rng());

  Status prefill_status;
  std::thread prefill([&] {
    Result<std::unique_ptr<UcxWorker>> w = UcxWorker::create();
    prefill_status = w.ok() ? run_prefill(**w, port, "secret", kModel, pages) : w.status();
  });
  DecodeResult d = run_decode(**decode, granted);
  prefill.join();
  ASSERT_TRUE(prefill_status.ok()) << prefill_status.to_string();
  ASSERT_TRUE(d.status.ok()) << d.status.to_string();
  for (uint32_t b = 0; b < kBlocks; ++b) {
    const uint8_t* block = d.region.data() + size_t{b} * kBlockBytes;
    const auto it = std::find(granted.begin(), granted.end(), b);
    if (it == granted.end()) {
      EXPECT_TRUE(std::all_of(block, block + kBlockBytes, [](uint8_t v) { return v == 0xEE; }))
          << "block " << b;
    } else {
      EXPECT_EQ(std::memcmp(block, pages[static_cast<size_t>(it - granted.begin())].data(), kBlockBytes), 0)
          << "block " << b;
    }
  }
}

// The decode side refuses the hello and says so; the prefill side gets the refusal (or, with another
// secret, cannot authenticate it) instead of a grant.
void expect_refused(const std::string& prefill_secret, const PeerIdentity& prefill_model, ErrorCode want,
                    ErrorCode prefill_want) {
  Result<std::unique_ptr<UcxWorker>> decode = UcxWorker::create();
  ASSERT_TRUE(decode.ok());
  ASSERT_TRUE((*decode)->listen("127.0.0.1", 0).ok());
  const uint16_t port = (*decode)->listen_port();
  std::vector<std::vector<uint8_t>> pages(1, std::vector<uint8_t>(kBlockBytes, 1));
  Status prefill_status;
  std::thread prefill([&] {
    Result<std::unique_ptr<UcxWorker>> w = UcxWorker::create();
    prefill_status = w.ok() ? run_prefill(**w, port, prefill_secret, prefill_model, pages) : w.status();
  });
  const DecodeResult d = run_decode(**decode, {1});
  prefill.join();
  EXPECT_EQ(d.status.code(), want) << d.status.to_string();
  EXPECT_EQ(prefill_status.code(), prefill_want) << prefill_status.to_string();
  EXPECT_TRUE(std::all_of(d.region.begin(), d.region.end(), [](uint8_t v) { return v == 0xEE; }));
}

TEST(UcxTransfer, AnotherSecretIsRefused) {
  expect_refused("wrong", kModel, ErrorCode::transport_auth_failed, ErrorCode::transport_auth_failed);
}

TEST(UcxTransfer, AnotherModelIsRefused) {
  expect_refused("secret", {"deepseek_v4:tiny:0001", 0x1234}, ErrorCode::transport_peer_mismatch,
                 ErrorCode::transport_peer_mismatch);
}

// Issue 15's persistent transport: one region registered once, one connection made once and kept
// (connect_cached / accept_pending), the decode side answering on the endpoint a frame came on;
// several transfers over it land exactly, and neither side makes another endpoint.
TEST(UcxTransfer, OneKeptConnectionCarriesManyTransfers) {
  constexpr int kRounds = 4;
  Result<std::unique_ptr<UcxWorker>> decode = UcxWorker::create();
  ASSERT_TRUE(decode.ok()) << decode.status().to_string();
  ASSERT_TRUE((*decode)->listen("127.0.0.1", 0).ok());
  const uint16_t port = (*decode)->listen_port();
  std::vector<uint8_t> region(size_t{kBlocks} * kBlockBytes, 0);
  Result<std::unique_ptr<RegisteredMemory>> mem = (*decode)->register_memory(region.data(), region.size());
  ASSERT_TRUE(mem.ok());

  Status prefill_status;
  size_t prefill_endpoints = 0;
  std::thread prefill([&] {
    const auto run = [&]() -> Status {
      DS_ASSIGN_OR_RETURN(std::unique_ptr<UcxWorker> w, UcxWorker::create());
      UcxEndpoint* first = nullptr;
      for (int r = 0; r < kRounds; ++r) {
        DS_ASSIGN_OR_RETURN(UcxEndpoint * ep, w->connect_cached("127.0.0.1", port));
        if (first == nullptr) first = ep;
        if (ep != first) return {ErrorCode::internal, "a second endpoint to the same peer"};
        const auto id = static_cast<uint64_t>(r);
        DS_TRY(
            ep->send(encode_control_message({ControlType::hello, id, encode_peer_identity(kModel)}, "secret"),
                     in(20)));
        DS_ASSIGN_OR_RETURN(std::string frame, w->receive(in(20)));
        DS_ASSIGN_OR_RETURN(ControlMessage m, decode_control_message(frame, "secret"));
        DS_ASSIGN_OR_RETURN(KvGrant grant, decode_kv_grant(m.payload));
        DS_ASSIGN_OR_RETURN(RemoteKey key, ep->unpack_remote_key(grant.regions.at(0).packed_rkey));
        std::vector<uint8_t> page(size_t{kBlockBytes} * grant.block_ids.size(), static_cast<uint8_t>(r + 1));
        // The granted blocks are consecutive: one put for all of them.
        DS_TRY(ep->put(page.data(), page.size(),
                       grant.arrays.at(0).address + uint64_t{grant.block_ids[0]} * kBlockBytes, key));
        DS_TRY(ep->flush(in(20)));
        DS_TRY(ep->send(encode_control_message({ControlType::kv_written, id, ""}, "secret"), in(20)));
      }
      prefill_endpoints = w->n_endpoints();
      return ok_status();
    };
    prefill_status = run();
  });
  UcxWorker& d = **decode;
  for (int r = 0; r < kRounds; ++r) {
    const std::vector<uint32_t> granted = {static_cast<uint32_t>(4 * r), static_cast<uint32_t>(4 * r + 1)};
    Result<Frame> hello = Status(ErrorCode::transport_timeout, "");
    for (auto until = in(20); !hello.ok() && steady_clock::now() < until;) {
      d.accept_pending();
      hello = d.receive_frame(steady_clock::now() + std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(hello.ok()) << hello.status().to_string();
    UcxEndpoint* ep = d.find(hello->from);
    ASSERT_NE(ep, nullptr) << "the hello came on an endpoint the decode side did not accept";
    KvGrant grant;
    grant.regions = {{(*mem)->address(), (*mem)->bytes(), (*mem)->packed_rkey()}};
    grant.arrays = {{(*mem)->address(), kBlockBytes}};
    grant.n_blocks = kBlocks;
    grant.block_ids = granted;
    ASSERT_TRUE(
        ep->send(encode_control_message(
                     {ControlType::kv_grant, static_cast<uint64_t>(r), encode_kv_grant(grant)}, "secret"),
                 in(20))
            .ok());
    Result<std::string> done = d.receive(in(20));
    ASSERT_TRUE(done.ok()) << done.status().to_string();
    for (uint32_t b : granted) {
      const uint8_t* block = region.data() + size_t{b} * kBlockBytes;
      EXPECT_TRUE(std::all_of(block, block + kBlockBytes, [&](uint8_t v) { return v == r + 1; }))
          << "round " << r << " block " << b;
    }
  }
  prefill.join();
  ASSERT_TRUE(prefill_status.ok()) << prefill_status.to_string();
  EXPECT_EQ(prefill_endpoints, 1u);
  EXPECT_EQ(d.n_endpoints(), 1u);
  EXPECT_TRUE(std::all_of(region.begin() + 16 * kBlockBytes, region.end(), [](uint8_t v) { return v == 0; }));
}

}  // namespace
}  // namespace ds::transport
