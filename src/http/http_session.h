// Internal to the server: one TCP connection (Session) and the state every connection shares
// (ServerCore). Not part of the handler-facing API (that is route_table.h + response_channel.h).
//
// Threading: a Session's members are touched only on its strand (one io thread at a time). Handlers
// talk to it through an Exchange (the ResponseChannel of one request), which posts onto that strand.
//
// Ownership: pending async operations own their Session (shared_ptr, Beast's usual pattern); while a
// handler works on a request the Session also owns itself (self_), because it might have no operation
// pending then. Exchanges hold only a weak_ptr, and post through Liveness, so a handler that keeps a
// channel after the server is gone posts nothing. The server closes every session before it stops.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "http/request_id.h"
#include "http/route_table.h"
#include "http/server_config.h"
#include "http/serving_metrics.h"

namespace ds::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Guards posting onto the io_context: alive turns false (under mu) before the io_context is destroyed.
struct Liveness {
  std::mutex mu;
  bool alive = true;
};

class Session;

struct ServerCore {
  ServerCore(ServerConfig c, RouteTable r, Logger l, ServingMetrics* m)
      : config(std::move(c)), router(std::move(r)), log(l), metrics(m) {}

  ServerConfig config;
  RouteTable router;
  Logger log;
  ServingMetrics* metrics;  // may be null
  RequestIdGenerator request_ids;
  std::atomic<bool> shutting_down{false};
  std::shared_ptr<Liveness> liveness = std::make_shared<Liveness>();

  std::mutex sessions_mu;               // guards sessions
  std::condition_variable sessions_cv;  // signalled when a session goes away
  std::unordered_map<const Session*, std::weak_ptr<Session>> sessions;
  // Last: destroyed first, so sessions its pending handlers still own can unregister above.
  net::io_context ioc;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerCore& core, tcp::socket socket);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Registers with the core and starts reading requests (call once, right after make_shared).
  void start();
  // Over max_connections: a 503 then close (instead of start()).
  void reject_overloaded();
  // Server shutdown, phase 1: idle connections close; in-flight responses finish, then close.
  void begin_shutdown();
  // Phase 2 (drain timed out): the client is cut off and the handler told (on_close).
  void abort();
  // After the io threads stopped: drops the self-reference so the io_context can destroy the session.
  void release_after_stop();

  // The connection's strand (the socket was accepted on it).
  const net::any_io_executor& executor() const { return executor_; }

  // Called by Exchange (posted onto the strand). `seq` names the request, so a late call from an old
  // request's channel cannot touch the next request on the same connection.
  void respond_full(uint64_t seq, int http_status, std::string content_type, std::string body,
                    HeaderList extra_headers);
  void respond_error(uint64_t seq, const HttpError& error);
  void stream_start(uint64_t seq, HeaderList extra_headers);
  void stream_write(uint64_t seq, std::string event_text);
  void stream_end(uint64_t seq);
  void stream_fail(uint64_t seq, const HttpError& error);
  // The channel was dropped: 500 if nothing was sent, else the stream ends with an error event.
  void exchange_abandoned(uint64_t seq);

 private:
  enum class Phase { reading, handling, closing, closed };

  void read_request();
  void on_first_bytes(boost::system::error_code ec, size_t n);
  void read_header();
  void on_header(boost::system::error_code ec);
  void on_body(boost::system::error_code ec);
  void dispatch();
  void reject_during_read(const HttpError& error, ErrorStyle style);
  void start_watch();
  void on_watch(boost::system::error_code ec, size_t n);

  HeaderList common_headers(bool keep_alive) const;
  void enqueue(std::string bytes);
  void do_write();
  void on_write(boost::system::error_code ec, size_t n);
  void finish_response();
  void after_response_written();
  void client_gone(const char* why);
  void close_socket();
  void lingering_close();
  void linger_read();

  void arm_timer(std::chrono::milliseconds after);
  void cancel_timer();

  ServerCore& core_;
  tcp::socket socket_;
  net::any_io_executor executor_;
  net::steady_timer timer_;
  uint64_t timer_gen_ = 0;  // a firing with a stale generation is ignored
  std::string remote_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;

  Phase phase_ = Phase::reading;
  bool shutdown_requested_ = false;
  std::shared_ptr<Session> self_;  // set while a handler owns the request (see header comment)

  // The request being answered.
  uint64_t seq_ = 0;
  std::weak_ptr<class Exchange> exchange_;
  ErrorStyle style_ = ErrorStyle::openai;
  std::string request_id_;
  std::string route_label_ = "unmatched";
  std::string method_label_;
  int64_t started_ns_ = 0;
  int response_status_ = 0;
  bool keep_alive_ = true;
  bool response_started_ = false;
  bool streaming_ = false;
  bool response_finished_ = false;  // everything queued; the connection moves on once it is written
  bool watch_pending_ = false;
  bool resume_after_watch_ = false;  // read the next request once the cancelled watch completes

  std::deque<std::string> out_;         // queued, not yet handed to a write
  std::vector<std::string> in_flight_;  // owned by the write in progress (its buffers point here)
  size_t unsent_bytes_ = 0;
  bool writing_ = false;
  size_t linger_bytes_ = 0;
};

}  // namespace ds::server
