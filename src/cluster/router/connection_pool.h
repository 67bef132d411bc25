// ConnectionPool: idle keep-alive connections from the router to each worker, so a request reuses an
// open TCP connection instead of paying a connect (and the worker an accept) per attempt.
//
// A relay takes a connection when it starts an attempt and gives it back only after a complete
// answer on a connection both sides keep alive (nothing left unread); any failure, a client that
// went away (closing is how the worker learns to cancel) or a stream cut short closes it instead.
// take() skips connections the worker has closed meanwhile (its idle timeout, a restart: a
// non-blocking peek sees the end of the stream) and ones idle longer than `max_idle`; a connection
// the worker closes between that check and the request is retried on a fresh one (relay.cpp).
//
// Thread-safe (one mutex; take and give are O(1) apart from dropping dead connections).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace ds::cluster {

struct ConnectionPoolConfig {
  size_t max_idle_per_worker = 32;             // 0: no reuse (one connection per attempt)
  std::chrono::milliseconds max_idle{20'000};  // below serve's 60 s keep-alive idle timeout
};

struct ConnectionPoolStats {
  int64_t reused = 0;   // take() handed out an idle connection
  int64_t opened = 0;   // take() found none: the caller connects
  int64_t dropped = 0;  // idle connections found closed, too old, or beyond the bound
};

class ConnectionPool {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  explicit ConnectionPool(ConnectionPoolConfig config) : config_(config) {}

  bool enabled() const { return config_.max_idle_per_worker > 0; }
  // The most recently returned live connection to `worker`, or nullopt (then connect a new one).
  std::optional<Socket> take(size_t worker);
  // A connection after a complete answer, both sides keeping it alive.
  void give(size_t worker, Socket socket);
  // The worker went away: its idle connections are closed.
  void drop_worker(size_t worker);
  ConnectionPoolStats stats() const;

 private:
  struct Idle {
    Socket socket;
    std::chrono::steady_clock::time_point since;
  };
  const ConnectionPoolConfig config_;
  mutable std::mutex mu_;
  std::vector<std::deque<Idle>> idle_;  // per worker, back = most recently returned
  ConnectionPoolStats stats_;
};

}  // namespace ds::cluster
