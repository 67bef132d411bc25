#include "kvcache/kv_event_publisher.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <optional>
#include <utility>
#include <zmq.hpp>

namespace ds {
namespace {

// "tcp://HOST:0" means any free port, which ZeroMQ spells "*".
std::string zmq_bind_spelling(std::string endpoint) {
  if (endpoint.starts_with("tcp://") && endpoint.ends_with(":0"))
    endpoint.replace(endpoint.size() - 1, 1, "*");
  return endpoint;
}

std::array<unsigned char, 8> big_endian(uint64_t v) {
  std::array<unsigned char, 8> b{};
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (56 - 8 * i));
  return b;
}

}  // namespace

struct KvEventPublisher::Impl {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;                // ROUTER; sender thread only after start
  std::deque<std::pair<uint64_t, std::string>> sent;  // (seq, payload) kept for replay; sender thread
};

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(const KvEventPublisherConfig& config) {
  auto impl = std::make_unique<Impl>();
  std::string endpoint;
  try {
    impl->socket.set(zmq::sockopt::linger, 1000);  // a closing server sends what it queued, within 1 s
    impl->socket.bind(zmq_bind_spelling(config.endpoint));
    endpoint = impl->socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("--kv-events-endpoint {}: cannot bind a ZeroMQ PUB socket: {}", config.endpoint,
                              e.what()));
  }
  std::string replay_endpoint;
  if (!config.replay_endpoint.empty()) {
    if (config.replay_buffer_batches == 0)
      return Status(ErrorCode::invalid_argument, "--kv-events-buffer-steps must be at least 1");
    try {
      impl->replay.emplace(impl->context, zmq::socket_type::router);
      impl->replay->set(zmq::sockopt::linger, 0);
      impl->replay->bind(zmq_bind_spelling(config.replay_endpoint));
      replay_endpoint = impl->replay->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("--kv-events-replay-endpoint {}: cannot bind a ZeroMQ ROUTER socket: {}",
                                config.replay_endpoint, e.what()));
    }
  }
  return std::unique_ptr<KvEventPublisher>(
      new KvEventPublisher(config, std::move(impl), std::move(endpoint), std::move(replay_endpoint)));
}

KvEventPublisher::KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Impl> impl,
                                   std::string endpoint, std::string replay_endpoint)
    : config_(std::move(config)),
      impl_(std::move(impl)),
      endpoint_(std::move(endpoint)),
      replay_endpoint_(std::move(replay_endpoint)) {
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::publish(std::vector<KvCacheEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= config_.max_queued_batches) {
      ++stats_.batches_dropped;
      ++next_seq_;  // the gap tells subscribers they missed a batch
      return;
    }
    queue_.push_back(std::move(events));
  }
  cv_.notify_one();
}

KvEventPublisherStats KvEventPublisher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KvEventPublisher::run() {
  // With a replay socket the sender also wakes every 20 ms when idle to answer requests (a router
  // waits up to 1 s for an answer).
  constexpr auto kReplayPollInterval = std::chrono::milliseconds(20);
  while (true) {
    if (impl_->replay) serve_replay_requests();
    std::vector<KvCacheEvent> events;
    uint64_t seq = 0;
    {
      std::unique_lock lock(mu_);
      auto ready = [this] { return stopping_ || !queue_.empty(); };
      if (impl_->replay) {
        if (!cv_.wait_for(lock, kReplayPollInterval, ready)) continue;
      } else {
        cv_.wait(lock, ready);
      }
      if (queue_.empty()) return;  // stopping and drained
      events = std::move(queue_.front());
      queue_.pop_front();
      seq = next_seq_++;
    }
    send_batch(seq, events);
  }
}

void KvEventPublisher::send_batch(uint64_t seq, const std::vector<KvCacheEvent>& events) {
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string payload = encode_kv_event_batch(ts, events, config_.format);
  const auto seq_be = big_endian(seq);
  try {
    impl_->socket.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
    impl_->socket.send(zmq::buffer(seq_be), zmq::send_flags::sndmore);
    impl_->socket.send(zmq::buffer(payload), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    // A PUB send fails only when the context is gone; the batch is lost like a dropped one.
  }
  if (impl_->replay) {
    impl_->sent.emplace_back(seq, std::move(payload));
    while (impl_->sent.size() > config_.replay_buffer_batches) impl_->sent.pop_front();
  }
  std::lock_guard lock(mu_);
  ++stats_.batches_published;
  stats_.events_published += static_cast<int64_t>(events.size());
}

void KvEventPublisher::serve_replay_requests() {
  zmq::socket_t& router = *impl_->replay;
  while (true) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    try {
      if (!router.recv(frame, zmq::recv_flags::dontwait)) return;
      frames.push_back(std::move(frame));
      while (frames.back().more()) {
        (void)router.recv(frame, zmq::recv_flags::none);
        frames.push_back(std::move(frame));
      }
    } catch (const zmq::error_t&) {
      return;
    }
    // [identity, "", start_seq] from REQ / DEALER-with-delimiter, [identity, start_seq] from a bare DEALER.
    const bool delimited = frames.size() == 3 && frames[1].size() == 0;
    if (!(delimited || frames.size() == 2) || frames.back().size() != 8) {
      std::lock_guard lock(mu_);
      ++stats_.replay_bad_requests;
      continue;
    }
    uint64_t start_seq = 0;
    const auto* b = static_cast<const unsigned char*>(frames.back().data());
    for (int i = 0; i < 8; ++i) start_seq = (start_seq << 8) | b[i];
    const std::string identity = frames[0].to_string();
    auto send_reply = [&](zmq::const_buffer seq, zmq::const_buffer payload) {
      router.send(zmq::buffer(identity), zmq::send_flags::sndmore);
      if (delimited) router.send(zmq::message_t(), zmq::send_flags::sndmore);
      router.send(seq, zmq::send_flags::sndmore);
      router.send(payload, zmq::send_flags::none);
    };
    int64_t replayed = 0;
    try {
      for (const auto& [seq, payload] : impl_->sent) {
        if (seq < start_seq) continue;
        const auto seq_be = big_endian(seq);
        send_reply(zmq::buffer(seq_be), zmq::buffer(payload));
        ++replayed;
      }
      const auto end_marker = big_endian(~uint64_t{0});  // vLLM's END_SEQ: -1 as 8 signed bytes
      send_reply(zmq::buffer(end_marker), zmq::const_buffer());
    } catch (const zmq::error_t&) {
      // A ROUTER drops messages for peers that went away; nothing to clean up.
    }
    std::lock_guard lock(mu_);
    ++stats_.replay_requests;
    stats_.batches_replayed += replayed;
  }
}

}  // namespace ds
