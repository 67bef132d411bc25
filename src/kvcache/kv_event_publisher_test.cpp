// KvEventPublisher's replay socket against a real ZeroMQ DEALER on loopback: a request from
// sequence S gets every kept batch from S on, byte-identical to what the PUB socket sent, then
// vLLM's end marker; batches beyond the buffer are gone; malformed requests are counted, not
// answered; a bare DEALER (no empty delimiter) is answered without one.
#include "kvcache/kv_event_publisher.h"
#include "kvcache/kv_tier.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <msgpuck.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace ds {
namespace {

std::string be8(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

uint64_t from_be8(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* b = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | b[i];
  return v;
}

std::vector<KvCacheEvent> one_stored(uint64_t hash) {
  KvCacheEvent e;
  e.kind = KvCacheEvent::Kind::stored;
  e.block_hashes = {hash};
  e.token_ids = std::vector<TokenId>(4, static_cast<TokenId>(hash));
  return {e};
}

// Receives one multipart message within `timeout`; empty when none came.
std::vector<zmq::message_t> recv_message(zmq::socket_t& s, std::chrono::milliseconds timeout) {
  std::vector<zmq::message_t> frames;
  std::vector<zmq::pollitem_t> items{{s.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, timeout) <= 0) return frames;
  zmq::message_t m;
  do {
    (void)s.recv(m, zmq::recv_flags::none);
    frames.push_back(std::move(m));
  } while (frames.back().more());
  return frames;
}

struct Replayed {
  std::vector<uint64_t> seqs;
  std::vector<std::string> payloads;
  bool ended = false;
};

Replayed request_replay(zmq::socket_t& dealer, uint64_t start, bool delimited) {
  if (delimited) dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(be8(start)), zmq::send_flags::none);
  Replayed r;
  while (true) {
    std::vector<zmq::message_t> f = recv_message(dealer, std::chrono::milliseconds(5000));
    if (f.empty()) return r;  // timed out: ended stays false
    const size_t first = delimited ? 1 : 0;
    EXPECT_EQ(f.size(), first + 2);
    if (f.size() != first + 2) return r;
    if (delimited) {
      EXPECT_EQ(f[0].size(), 0u);
    }
    if (f[first + 1].size() == 0) {
      EXPECT_EQ(from_be8(f[first]), ~uint64_t{0});
      r.ended = true;
      return r;
    }
    r.seqs.push_back(from_be8(f[first]));
    r.payloads.push_back(f[first + 1].to_string());
  }
}

template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(KvEventPublisherReplay, AnswersFromTheRequestedSequenceWithWhatWasSent) {
  KvEventPublisherConfig cfg;
  cfg.endpoint = "tcp://127.0.0.1:0";
  cfg.replay_endpoint = "tcp://127.0.0.1:0";
  cfg.replay_buffer_batches = 5;
  cfg.topic = "kv";
  auto started = KvEventPublisher::start(cfg);
  ASSERT_TRUE(started.ok()) << started.status().message();
  KvEventPublisher& pub = **started;
  ASSERT_FALSE(pub.replay_endpoint().empty());
  EXPECT_NE(pub.replay_endpoint(), pub.endpoint());

  // A subscriber records what the PUB socket sent, to compare the replay's bytes with.
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::linger, 0);
  sub.connect(pub.endpoint());
  // ZeroMQ connects asynchronously: publish probes until one arrives; their seqs are used up.
  uint64_t next = 0;
  ASSERT_TRUE(eventually([&] {
    pub.publish(one_stored(1000 + next));
    ++next;
    return !recv_message(sub, std::chrono::milliseconds(20)).empty();
  }));
  while (!recv_message(sub, std::chrono::milliseconds(50)).empty()) {
  }
  ASSERT_TRUE(eventually([&] { return pub.stats().batches_published == static_cast<int64_t>(next); }));

  std::vector<std::string> live;  // payloads of seqs next .. next+7
  const uint64_t first = next;
  for (int i = 0; i < 8; ++i) pub.publish(one_stored(static_cast<uint64_t>(i)));
  for (int i = 0; i < 8; ++i) {
    std::vector<zmq::message_t> f = recv_message(sub, std::chrono::milliseconds(5000));
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(from_be8(f[1]), first + static_cast<uint64_t>(i));
    live.push_back(f[2].to_string());
  }

  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(pub.replay_endpoint());

  // From 2 batches before the end: exactly those two, bytes as published.
  Replayed tail = request_replay(dealer, first + 6, /*delimited=*/true);
  ASSERT_TRUE(tail.ended);
  EXPECT_EQ(tail.seqs, (std::vector<uint64_t>{first + 6, first + 7}));
  EXPECT_EQ(tail.payloads, (std::vector<std::string>{live[6], live[7]}));

  // From the first of the 8: only the last 5 are kept, so the reply starts at first + 3.
  Replayed all = request_replay(dealer, first, /*delimited=*/false);
  ASSERT_TRUE(all.ended);
  EXPECT_EQ(all.seqs, (std::vector<uint64_t>{first + 3, first + 4, first + 5, first + 6, first + 7}));
  EXPECT_EQ(all.payloads.front(), live[3]);

  // Past the end: just the end marker.
  Replayed none = request_replay(dealer, first + 100, /*delimited=*/true);
  EXPECT_TRUE(none.ended);
  EXPECT_TRUE(none.seqs.empty());

  // A malformed request (a 3-byte sequence) is counted and gets no answer.
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(std::string("abc")), zmq::send_flags::none);
  EXPECT_TRUE(eventually([&] { return pub.stats().replay_bad_requests == 1; }));
  EXPECT_TRUE(recv_message(dealer, std::chrono::milliseconds(100)).empty());

  const KvEventPublisherStats s = pub.stats();
  EXPECT_EQ(s.replay_requests, 3);
  EXPECT_EQ(s.batches_replayed, 7);
}

TEST(KvEventPublisherReplay, WithoutAReplayEndpointThereIsNoSocket) {
  KvEventPublisherConfig cfg;
  cfg.endpoint = "tcp://127.0.0.1:0";
  auto started = KvEventPublisher::start(cfg);
  ASSERT_TRUE(started.ok());
  EXPECT_TRUE((*started)->replay_endpoint().empty());
}

TEST(KvEventPublisherReplay, AnUnbindableReplayEndpointIsAnErrorNamingTheFlag) {
  KvEventPublisherConfig cfg;
  cfg.endpoint = "tcp://127.0.0.1:0";
  cfg.replay_endpoint = "bogus://x";
  auto started = KvEventPublisher::start(cfg);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("--kv-events-replay-endpoint bogus://x"), std::string::npos);
}

// The keys of each event map of an encoded batch, and the extra_keys value (as "k0,nil,..." text).
struct EncodedEvent {
  std::vector<std::string> keys;
  std::string extra_keys;
};
std::vector<EncodedEvent> read_events(const std::string& payload) {
  const char* p = payload.data();
  EXPECT_EQ(mp_decode_array(&p), 2u);
  mp_next(&p);  // ts
  std::vector<EncodedEvent> out;
  const uint32_t n = mp_decode_array(&p);
  for (uint32_t e = 0; e < n; ++e) {
    EncodedEvent ev;
    const uint32_t n_fields = mp_decode_map(&p);
    for (uint32_t f = 0; f < n_fields; ++f) {
      uint32_t len = 0;
      const char* k = mp_decode_str(&p, &len);
      ev.keys.emplace_back(k, len);
      if (ev.keys.back() != "extra_keys") {
        mp_next(&p);
        continue;
      }
      const uint32_t n_blocks = mp_decode_array(&p);
      for (uint32_t b = 0; b < n_blocks; ++b) {
        if (b > 0) ev.extra_keys += ",";
        if (mp_typeof(*p) == MP_NIL) {
          mp_next(&p);
          ev.extra_keys += "nil";
          continue;
        }
        EXPECT_EQ(mp_decode_array(&p), 1u);
        const char* v = mp_decode_str(&p, &len);
        ev.extra_keys.append(v, len);
      }
    }
    out.push_back(std::move(ev));
  }
  return out;
}

TEST(KvEventEncoding, ASaltedRunFromPositionZeroCarriesItsSaltTagNeverTheSalt) {
  KvEventBatchFormat format;
  format.block_size_tokens = 2;
  KvCacheEvent root;
  root.block_hashes = {5, 6};
  root.token_ids = {1, 2, 3, 4};
  root.salt_tag = tier_salt_tag("tenant-secret");
  KvCacheEvent child = root;  // a later run of the same salted sequence
  child.block_hashes = {7};
  child.parent_hash = 6;
  child.token_ids = {5, 6};
  KvCacheEvent plain = root;
  plain.salt_tag.reset();
  const std::string payload =
      encode_kv_event_batch(1.0, std::vector<KvCacheEvent>{root, child, plain}, format);
  EXPECT_EQ(payload.find("tenant-secret"), std::string::npos);
  const std::vector<EncodedEvent> evs = read_events(payload);
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[0].keys.size(), 9u);
  EXPECT_EQ(evs[0].keys.back(), "extra_keys");
  EXPECT_EQ(evs[0].extra_keys, fmt::format("salt_tag:{:016x},nil", tier_salt_tag("tenant-secret")));
  EXPECT_EQ(evs[1].keys.size(), 8u);  // not at position 0: the parent carries the salt
  EXPECT_EQ(evs[2].keys.size(), 8u);  // unsalted: vLLM's usual field set
}

}  // namespace
}  // namespace ds
