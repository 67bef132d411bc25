#include "cluster/router/relay.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "http/http_error.h"

namespace ds::cluster {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBodyBytes = 256u << 20;  // a non-streamed answer larger than this is a worker bug

server::HttpError relay_error(int status, server::ErrorStyle style, std::string message, std::string code,
                              int retry_after_s) {
  server::HttpError e;
  e.http_status = status;
  e.type = style == server::ErrorStyle::anthropic ? (status == 503 ? "overloaded_error" : "api_error")
                                                  : (status == 503 ? "service_unavailable" : "server_error");
  e.message = std::move(message);
  e.code = std::move(code);
  e.retry_after_s = retry_after_s;
  return e;
}

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(const RelayContext& c, RelayRequest r, std::shared_ptr<server::ResponseChannel> out)
      : c_(c),
        req_(std::move(r)),
        out_(std::move(out)),
        strand_(net::make_strand(*c.ioc)),
        resolver_(strand_),
        deadline_(Clock::now() + c.config->request_timeout) {
    c_.open_relays->fetch_add(1);
  }
  ~Relay() { c_.open_relays->fetch_sub(1); }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void start() {
    auto self = shared_from_this();
    // Weak: the channel keeps this callback until it closes, and the relay keeps the channel; a strong
    // capture would be a cycle that outlives every finished request. Pending operations own the relay.
    std::weak_ptr<Relay> weak = self;
    out_->on_close([weak] {
      if (auto relay = weak.lock()) net::post(relay->strand_, [relay] { relay->client_gone(); });
    });
    net::post(strand_, [self] { self->attempt(); });
  }

 private:
  std::chrono::milliseconds remaining() const {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()));
  }

  void attempt() {
    if (done_) return;
    if (Clock::now() >= deadline_) {
      return fail(relay_error(504, out_->error_style(), "no worker answered before the request's deadline",
                              "upstream_timeout", 0));
    }
    excluded_.resize(c_.pool->size(), false);
    const Clock::time_point pick_start = Clock::now();
    const RoutePick pick = c_.router->pick(req_.prompt_blocks, req_.session, excluded_, req_.n_prompt_tokens,
                                           req_.count_decision);
    if (attempts_ == 0 && req_.count_decision) {
      c_.metrics->decision_seconds.observe(req_.prepare_seconds +
                                           std::chrono::duration<double>(Clock::now() - pick_start).count());
    }
    if (pick.worker < 0) {
      if (attempts_ == 0) c_.metrics->no_worker.inc();
      return fail(relay_error(503, out_->error_style(),
                              attempts_ == 0 ? "no worker is available" : "no worker could take the request",
                              "no_worker_available", c_.config->retry_after_s));
    }
    if (attempts_ > 0) c_.metrics->retries.inc();
    ++attempts_;
    excluded_[static_cast<size_t>(pick.worker)] = true;
    worker_ = c_.pool->at(static_cast<size_t>(pick.worker));
    worker_->in_flight.fetch_add(1);
    holding_ = true;
    c_.metrics->requests.with({worker_->address.url}).inc();

    worker_id_ = static_cast<size_t>(pick.worker);
    if (std::optional<tcp::socket> idle = c_.connections->take(worker_id_)) {
      // Rebind the connection to this relay's strand: its completions must not race client_gone().
      beast::error_code ec;
      const tcp::endpoint local = idle->local_endpoint(ec);
      const int fd = ec ? -1 : idle->release(ec);
      if (!ec && fd >= 0) {
        stream_.emplace(tcp::socket(strand_, local.protocol(), fd));
        reused_ = true;
        return on_connect({});
      }
    }
    connect_fresh();
  }

  void connect_fresh() {
    reused_ = false;
    stream_.emplace(strand_);
    resolver_.async_resolve(worker_->address.host, std::to_string(worker_->address.port),
                            [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type r) {
                              self->on_resolve(ec, std::move(r));
                            });
  }

  // A kept-alive connection the worker closed just before our request (its idle timeout) fails at the
  // write or before the first byte of the answer: the request never ran, so it goes again on a new
  // connection to the same worker, not counted as an attempt.
  bool retry_fresh_if_reused() {
    if (!reused_) return false;
    close_stream();
    connect_fresh();
    return true;
  }

  void on_resolve(beast::error_code ec, tcp::resolver::results_type results) {
    if (done_) return;
    if (ec) return attempt_failed(true, "resolve: " + ec.message());
    stream_->expires_after(std::min(c_.config->connect_timeout, remaining()));
    stream_->async_connect(results, [self = shared_from_this()](beast::error_code e, const tcp::endpoint&) {
      self->on_connect(e);
    });
  }

  void on_connect(beast::error_code ec) {
    if (done_) return;
    if (ec) return attempt_failed(true, "connect: " + ec.message());
    upstream_ = {};
    upstream_.method_string(req_.method);
    upstream_.target(req_.target);
    upstream_.version(11);
    upstream_.set(http::field::host, fmt::format("{}:{}", worker_->address.host, worker_->address.port));
    for (const auto& [name, value] : req_.forward_headers) upstream_.set(name, value);
    upstream_.set("X-Request-Id", req_.request_id);
    if (!c_.config->worker_api_key.empty())
      upstream_.set(http::field::authorization, "Bearer " + c_.config->worker_api_key);
    upstream_.keep_alive(c_.connections->enabled());
    upstream_.body() = req_.body;
    upstream_.prepare_payload();
    stream_->expires_after(remaining());
    http::async_write(*stream_, upstream_,
                      [self = shared_from_this()](beast::error_code e, size_t) { self->on_write(e); });
  }

  void on_write(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      if (retry_fresh_if_reused()) return;
      return attempt_failed(false, "write: " + ec.message());
    }
    parser_.emplace();
    parser_->body_limit(kMaxBodyBytes);
    buffer_.clear();
    stream_->expires_after(remaining());
    http::async_read_header(*stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code e, size_t) { self->on_header(e); });
  }

  void on_header(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      if (buffer_.size() == 0 && retry_fresh_if_reused()) return;
      return attempt_failed(false, "read: " + ec.message());
    }
    const int status = static_cast<int>(parser_->get().result_int());
    if ((status == 429 || status == 503) && attempts_ < c_.config->max_attempts && another_worker_left()) {
      return attempt_failed(false, fmt::format("answered {}", status));
    }
    if (status >= 500) c_.metrics->errors.with({worker_->address.url}).inc();
    const auto content_type = parser_->get()[http::field::content_type];
    if (status == 200 && content_type.starts_with("text/event-stream")) {
      parser_->body_limit(boost::none);  // a stream is bounded by the deadline, not by size
      out_->start_stream();
      streaming_ = true;
      return read_stream();
    }
    stream_->expires_after(remaining());
    http::async_read(*stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code e, size_t) { self->on_full_body(e); });
  }

  bool another_worker_left() const {
    const auto all = c_.pool->all();
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i]->usable() && !(i < excluded_.size() && excluded_[i])) return true;
    return false;
  }

  void on_full_body(beast::error_code ec) {
    if (done_) return;
    if (ec) return attempt_failed(false, "read body: " + ec.message());
    auto& res = parser_->get();
    server::HeaderList headers;
    if (auto ra = res[http::field::retry_after]; !ra.empty())
      headers.emplace_back("Retry-After", std::string(ra));
    std::string content_type(res[http::field::content_type]);
    reusable_ = res.keep_alive() && buffer_.size() == 0;
    out_->send(static_cast<int>(res.result_int()), content_type.empty() ? "application/json" : content_type,
               std::move(res.body()), std::move(headers));
    finish();
  }

  void read_stream() {
    stream_->expires_after(remaining());
    http::async_read_some(
        *stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code e, size_t) { self->on_stream_data(e); });
  }

  void on_stream_data(beast::error_code ec) {
    if (done_) return;
    std::string& body = parser_->get().body();
    pending_ += body;
    body.clear();
    // Forward whole events only: an error event written after a cut mid-event would be garbled.
    if (const size_t end = pending_.rfind("\n\n"); end != std::string::npos) {
      out_->write_sse_bytes(pending_.substr(0, end + 2));
      pending_.erase(0, end + 2);
    }
    if (parser_->is_done()) {
      if (!pending_.empty()) out_->write_sse_bytes(std::move(pending_));
      out_->end_stream();
      reusable_ = parser_->get().keep_alive() && buffer_.size() == 0;
      return finish();
    }
    if (ec) {
      c_.metrics->errors.with({worker_->address.url}).inc();
      const server::ErrorStyle style = out_->error_style();
      out_->write_sse_bytes(server::sse_error_event(
          relay_error(502, style, "the worker serving this stream failed; the stream cannot be resumed",
                      "upstream_failed", 0),
          style));
      out_->end_stream();
      return finish();
    }
    read_stream();
  }

  // Nothing has reached the client: try another worker, or give up with a 502.
  void attempt_failed(bool connect_failed, const std::string& why) {
    c_.metrics->errors.with({worker_->address.url}).inc();
    // A worker that refuses connections leaves the rotation at once; the health poller restores it, with an
    // empty prefix index (nothing listening means the process went away, and its cache with it).
    if (connect_failed) {
      worker_->healthy.store(false);
      worker_->lost_cache.store(true);
      c_.connections->drop_worker(worker_id_);
    }
    release_worker();
    last_error_ = fmt::format("{}: {}", worker_->address.url, why);
    if (attempts_ < c_.config->max_attempts && Clock::now() < deadline_) return attempt();
    fail(relay_error(502, out_->error_style(), "no worker could answer the request", "upstream_failed", 0));
  }

  void fail(const server::HttpError& e) {
    out_->send_http_error(e);
    finish();
  }

  void client_gone() {
    if (done_) return;
    finish();  // closing the worker connection cancels its engine request
  }

  void release_worker() {
    if (holding_) worker_->in_flight.fetch_sub(1);
    holding_ = false;
    if (stream_ && reusable_) {  // the answer was read to its end: nothing is pending on the stream
      stream_->expires_never();
      c_.connections->give(worker_id_, stream_->release_socket());
      stream_.reset();
    }
    reusable_ = false;
    close_stream();
    resolver_.cancel();
  }

  // Not reset: a pending operation of a client that went away still refers to the stream; it completes
  // with an error (the next attempt, with none pending, emplaces a new one).
  void close_stream() {
    if (!stream_) return;
    beast::error_code ignored;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_->close();
  }

  void finish() {
    done_ = true;
    release_worker();
  }

  const RelayContext c_;
  RelayRequest req_;
  std::shared_ptr<server::ResponseChannel> out_;
  net::strand<net::io_context::executor_type> strand_;
  tcp::resolver resolver_;
  const Clock::time_point deadline_;

  // Everything below is touched on strand_ only.
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> upstream_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::shared_ptr<WorkerState> worker_;
  size_t worker_id_ = 0;
  std::vector<bool> excluded_;
  int attempts_ = 0;
  bool holding_ = false;  // worker_->in_flight counts this request
  bool streaming_ = false;
  bool done_ = false;
  bool reused_ = false;     // this attempt's connection came from the pool
  bool reusable_ = false;   // the answer is complete and both sides keep the connection: back to the pool
  std::string pending_;     // stream bytes after the last whole event
  std::string last_error_;  // for the log of a request that failed everywhere
};

}  // namespace

void start_relay(const RelayContext& context, RelayRequest request,
                 std::shared_ptr<server::ResponseChannel> out) {
  std::make_shared<Relay>(context, std::move(request), std::move(out))->start();
}

}  // namespace ds::cluster
