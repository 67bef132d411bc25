// Test-only: a real redis-server on a free loopback port (or a unix socket), started and stopped
// by the test, with bounded waits. No persistence (--save "" --appendonly no).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>

namespace ds::testing {

class RedisServer {
 public:
  // port 0: a free one. Check ok() afterwards.
  explicit RedisServer(int port = 0) : port_(port == 0 ? free_port() : port) { start(); }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return ready_; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // The same server on a unix socket.
  std::string unix_url() const { return "unix://" + socket_path(); }
  std::string socket_path() const { return "/tmp/ds_test_redis_" + std::to_string(port_) + ".sock"; }

  // SIGKILL (a crash) and reap.
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    ready_ = false;
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    ready_ = false;
  }
  // Starts again on the same port (after kill()).
  void start() {
    const std::string port = std::to_string(port_);
    const std::string socket = socket_path();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null_fd = ::open("/dev/null", O_WRONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
      ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--unixsocket",
               socket.c_str(), "--save", "", "--appendonly", "no", "--loglevel", "warning",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      redisContext* c = redisConnect("127.0.0.1", port_);
      if (c != nullptr && c->err == 0) {
        auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
        const bool pong = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
        if (reply != nullptr) freeReplyObject(reply);
        redisFree(c);
        if (pong) {
          ready_ = true;
          return;
        }
      } else if (c != nullptr) {
        redisFree(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      port = ntohs(addr.sin_port);
    ::close(fd);
    return port;
  }

  int port_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace ds::testing
