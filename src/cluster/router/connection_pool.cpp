#include "cluster/router/connection_pool.h"

#include <sys/socket.h>

#include <cerrno>

namespace ds::cluster {
namespace {

// Still open with nothing unread: a peek would block. 0 bytes = the worker closed it; bytes = a stray
// answer that belongs to no request.
bool idle_and_open(ConnectionPool::Socket& s) {
  char c;
  const ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

std::optional<ConnectionPool::Socket> ConnectionPool::take(size_t worker) {
  if (!enabled()) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  if (worker < idle_.size()) {
    std::deque<Idle>& q = idle_[worker];
    while (!q.empty()) {
      Idle idle = std::move(q.back());
      q.pop_back();
      if (now - idle.since <= config_.max_idle && idle_and_open(idle.socket)) {
        ++stats_.reused;
        return std::move(idle.socket);
      }
      ++stats_.dropped;  // closed when `idle` goes out of scope
    }
  }
  ++stats_.opened;
  return std::nullopt;
}

void ConnectionPool::give(size_t worker, Socket socket) {
  if (!enabled()) return;
  std::lock_guard lock(mu_);
  if (worker >= idle_.size()) idle_.resize(worker + 1);
  std::deque<Idle>& q = idle_[worker];
  q.push_back(Idle{std::move(socket), std::chrono::steady_clock::now()});
  while (q.size() > config_.max_idle_per_worker) {
    q.pop_front();  // the oldest goes first
    ++stats_.dropped;
  }
}

void ConnectionPool::drop_worker(size_t worker) {
  std::lock_guard lock(mu_);
  if (worker < idle_.size()) {
    stats_.dropped += static_cast<int64_t>(idle_[worker].size());
    idle_[worker].clear();
  }
}

ConnectionPoolStats ConnectionPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace ds::cluster
