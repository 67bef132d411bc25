#include "kvcache/kv_event_publisher.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>
#include <zmq.hpp>

namespace ds {

struct KvEventPublisher::Impl {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::pub};
};

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(const KvEventPublisherConfig& config) {
  auto impl = std::make_unique<Impl>();
  std::string endpoint = config.endpoint;
  // "tcp://HOST:0" means any free port, which ZeroMQ spells "*".
  if (endpoint.starts_with("tcp://") && endpoint.ends_with(":0"))
    endpoint.replace(endpoint.size() - 1, 1, "*");
  try {
    impl->socket.set(zmq::sockopt::linger, 1000);  // a closing server sends what it queued, within 1 s
    impl->socket.bind(endpoint);
    endpoint = impl->socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("--kv-events-endpoint {}: cannot bind a ZeroMQ PUB socket: {}", config.endpoint,
                              e.what()));
  }
  return std::unique_ptr<KvEventPublisher>(
      new KvEventPublisher(config, std::move(impl), std::move(endpoint)));
}

KvEventPublisher::KvEventPublisher(KvEventPublisherConfig config, std::unique_ptr<Impl> impl,
                                   std::string endpoint)
    : config_(std::move(config)), impl_(std::move(impl)), endpoint_(std::move(endpoint)) {
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
  while (true) {
    std::vector<KvCacheEvent> events;
    uint64_t seq = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      events = std::move(queue_.front());
      queue_.pop_front();
      seq = next_seq_++;
    }
    const double ts =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string payload = encode_kv_event_batch(ts, events, config_.format);
    unsigned char seq_be[8];
    for (int i = 0; i < 8; ++i) seq_be[i] = static_cast<unsigned char>(seq >> (56 - 8 * i));
    try {
      impl_->socket.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
      impl_->socket.send(zmq::buffer(seq_be, sizeof(seq_be)), zmq::send_flags::sndmore);
      impl_->socket.send(zmq::buffer(payload), zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      // A PUB send fails only when the context is gone; the batch is lost like a dropped one.
    }
    std::lock_guard lock(mu_);
    ++stats_.batches_published;
    stats_.events_published += static_cast<int64_t>(events.size());
  }
}

}  // namespace ds
