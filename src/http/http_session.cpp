#include "http/http_session.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <exception>

#include "base/clock.h"
#include "http/exchange.h"
#include "http/http_wire.h"

namespace ds::server {
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

constexpr size_t kReadChunkBytes = 4096;
// How much of a pipelined next request the disconnect watch buffers before it stops reading.
constexpr size_t kMaxWatchBufferBytes = 64u << 10;
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerMaxBytes = 1u << 20;
constexpr size_t kMaxGatherBuffers = 64;

std::string method_label(std::string_view method) {
  // Known verbs only: a client must not be able to mint new metric series.
  for (std::string_view m : {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"}) {
    if (method == m) return std::string(m);
  }
  return "other";
}

}  // namespace

Session::Session(ServerCore& core, tcp::socket socket)
    : core_(core), socket_(std::move(socket)), executor_(socket_.get_executor()), timer_(executor_) {
  error_code ec;
  const tcp::endpoint ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
  socket_.set_option(tcp::no_delay(true), ec);  // SSE events are small and latency-bound
}

Session::~Session() {
  std::lock_guard lock(core_.sessions_mu);
  core_.sessions.erase(this);
  core_.sessions_cv.notify_all();
}

void Session::start() {
  {
    std::lock_guard lock(core_.sessions_mu);
    core_.sessions.emplace(this, weak_from_this());
  }
  net::post(executor_, [self = shared_from_this()] { self->read_request(); });
}

void Session::reject_overloaded() {
  net::post(executor_, [self = shared_from_this()] {
    self->keep_alive_ = false;
    self->response_started_ = true;
    self->response_finished_ = true;
    self->phase_ = Phase::handling;
    self->method_label_ = "other";
    self->request_id_ = self->core_.request_ids.next();
    self->started_ns_ = now_ns();
    self->response_status_ = 503;
    HttpError e = shutting_down_error(ErrorStyle::openai, self->core_.config.retry_after_s);
    e.message = "too many open connections";
    e.code = "too_many_connections";
    HeaderList h = self->common_headers(false);
    h.emplace_back("Content-Type", "application/json");
    const std::string body = error_body(e, ErrorStyle::openai);
    h.emplace_back("Content-Length", std::to_string(body.size()));
    h.emplace_back("Retry-After", std::to_string(e.retry_after_s));
    self->enqueue(response_head(503, h) + body);
  });
}

void Session::begin_shutdown() {
  net::post(executor_, [self = shared_from_this()] {
    self->shutdown_requested_ = true;
    // Idle or mid-request: nothing owed to anyone yet.
    if (self->phase_ == Phase::reading) self->close_socket();
  });
}

void Session::abort() {
  net::post(executor_, [self = shared_from_this()] { self->client_gone("server shutting down"); });
}

void Session::release_after_stop() {
  // Io threads are joined: nothing else touches this session now.
  if (auto ex = exchange_.lock()) ex->notify_closed();
  error_code ec;
  socket_.close(ec);
  phase_ = Phase::closed;
  self_.reset();
}

// ---- reading a request ----

void Session::read_request() {
  if (phase_ == Phase::closed || phase_ == Phase::closing) return;
  if (shutdown_requested_ || core_.shutting_down.load(std::memory_order_acquire)) {
    close_socket();
    return;
  }
  phase_ = Phase::reading;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(core_.config.max_header_bytes));
  parser_->body_limit(core_.config.max_body_bytes);
  if (buffer_.size() > 0) {
    read_header();
    return;
  }
  // Idle keep-alive wait: a separate (longer) timeout than the request itself.
  arm_timer(core_.config.idle_timeout);
  socket_.async_read_some(
      buffer_.prepare(kReadChunkBytes),
      [self = shared_from_this()](error_code ec, size_t n) { self->on_first_bytes(ec, n); });
}

void Session::on_first_bytes(error_code ec, size_t n) {
  if (ec) {
    close_socket();  // idle timeout, client closed, or shutdown: nothing to answer
    return;
  }
  buffer_.commit(n);
  read_header();
}

void Session::read_header() {
  arm_timer(core_.config.request_read_timeout);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(error_code ec) {
  if (ec) {
    on_body(ec);
    return;
  }
  const auto& req = parser_->get();
  size_t n_fields = 0;
  for (auto it = req.begin(); it != req.end(); ++it) ++n_fields;
  if (n_fields > core_.config.max_header_count) {
    const ErrorStyle style = error_style_for_path(std::string(req.target()));
    reject_during_read(headers_too_large_error(style), style);
    return;
  }
  if (parser_->is_done()) {
    on_body({});
    return;
  }
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->socket_, self->buffer_, *self->parser_,
                     [self](error_code ec2, size_t) { self->on_body(ec2); });
  };
  auto expect = req.find(http::field::expect);
  if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this(), read_body](error_code ec2, size_t) {
                       if (ec2) {
                         self->close_socket();
                         return;
                       }
                       read_body();
                     });
    return;
  }
  read_body();
}

void Session::on_body(error_code ec) {
  cancel_timer();
  if (!ec) {
    dispatch();
    return;
  }
  // The path decides the error shape. The request line is parsed before the fields, so the path is
  // known even when a field (a Content-Length over the limit) is refused before the headers end.
  const std::string target(parser_->get().target());
  const ErrorStyle style = target.empty() ? ErrorStyle::openai : error_style_for_path(target);
  if (ec == http::error::body_limit) {
    reject_during_read(payload_too_large_error(style, core_.config.max_body_bytes), style);
  } else if (ec == http::error::header_limit) {
    reject_during_read(headers_too_large_error(style), style);
  } else if (ec == http::error::end_of_stream || ec == net::error::eof ||
             ec == net::error::operation_aborted || ec == net::error::connection_reset ||
             ec == net::error::bad_descriptor || ec == net::error::broken_pipe) {
    // The client left (or the read timed out and the timer closed the socket): no one to answer.
    core_.log.log(LogLevel::debug, "connection {} closed while reading: {}", remote_, ec.message());
    close_socket();
  } else {
    reject_during_read(bad_http_error(style, ec.message()), style);
  }
}

void Session::reject_during_read(const HttpError& error, ErrorStyle style) {
  // The stream cannot be resynchronised after a bad request: answer, then close.
  phase_ = Phase::handling;
  keep_alive_ = false;
  style_ = style;
  request_id_ = core_.request_ids.next();
  started_ns_ = now_ns();
  route_label_ = "unmatched";
  method_label_ =
      parser_->is_header_done() ? method_label(std::string(parser_->get().method_string())) : "other";
  response_started_ = false;
  response_finished_ = false;
  streaming_ = false;
  ++seq_;
  respond_error(seq_, error);
}

void Session::dispatch() {
  phase_ = Phase::handling;
  ++seq_;
  started_ns_ = now_ns();
  response_started_ = false;
  response_finished_ = false;
  streaming_ = false;
  route_label_ = "unmatched";

  http::request<http::string_body> req = parser_->release();
  parser_.reset();
  keep_alive_ = req.keep_alive();
  const std::string_view target(req.target().data(), req.target().size());
  const size_t q = target.find('?');
  ServerRequest sreq;
  sreq.method = std::string(req.method_string());
  sreq.path = std::string(target.substr(0, q));
  sreq.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  method_label_ = method_label(sreq.method);
  style_ = error_style_for_path(sreq.path);

  auto rid = req.find("x-request-id");
  if (rid != req.end() &&
      is_acceptable_request_id(std::string_view(rid->value().data(), rid->value().size()))) {
    request_id_ = std::string(rid->value());
  } else {
    request_id_ = core_.request_ids.next();
  }

  if (shutdown_requested_ || core_.shutting_down.load(std::memory_order_acquire)) {
    keep_alive_ = false;
    respond_error(seq_, shutting_down_error(style_, core_.config.retry_after_s));
    return;
  }

  const RouteTable::Match match =
      core_.router.match(sreq.method, sreq.path, core_.config.enable_admin_routes);
  if (match.kind == RouteTable::Match::Kind::not_found) {
    respond_error(seq_, not_found_error(style_, sreq.method, sreq.path));
    return;
  }
  if (match.kind == RouteTable::Match::Kind::method_not_allowed) {
    HttpError e = method_not_allowed_error(style_, sreq.method, sreq.path);
    HeaderList h{{"Allow", match.allow}};
    response_started_ = true;
    response_finished_ = true;
    response_status_ = 405;
    HeaderList all = common_headers(keep_alive_);
    all.insert(all.end(), h.begin(), h.end());
    const std::string body = error_body(e, style_);
    all.emplace_back("Content-Type", "application/json");
    all.emplace_back("Content-Length", std::to_string(body.size()));
    enqueue(response_head(405, all) + body);
    return;
  }
  const Route& route = *match.route;
  style_ = route.options.error_style;
  route_label_ = route.path;

  const bool admin_keyed = route.options.access == RouteAccess::admin && !core_.config.admin_api_keys.empty();
  const bool needs_key =
      admin_keyed || (!core_.config.api_keys.empty() && (route.options.access != RouteAccess::operational ||
                                                         core_.config.operational_routes_need_key));
  if (needs_key) {
    auto auth = req.find(http::field::authorization);
    auto xkey = req.find("x-api-key");
    const std::string_view auth_v = auth == req.end() ? std::string_view() : std::string_view(auth->value());
    const std::string_view xkey_v = xkey == req.end() ? std::string_view() : std::string_view(xkey->value());
    const std::optional<std::string_view> key = presented_api_key(auth_v, xkey_v);
    const ApiKeySet& keys = admin_keyed ? core_.config.admin_api_keys : core_.config.api_keys;
    if (!key || !keys.matches(*key)) {
      // A client key on an admin route is known but not allowed.
      const bool client_key = admin_keyed && key && core_.config.api_keys.matches(*key);
      respond_error(seq_, client_key ? forbidden_error(style_) : unauthorized_error(style_));
      return;
    }
  }

  for (const auto& field : req)
    sreq.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  sreq.body = std::move(req.body());
  sreq.request_id = request_id_;
  sreq.remote_addr = remote_;

  auto exchange = std::make_shared<Exchange>(core_.liveness, weak_from_this(), seq_, style_, request_id_,
                                             core_.config.retry_after_s);
  exchange_ = exchange;
  self_ = shared_from_this();
  start_watch();
  try {
    route.handler->handle(std::move(sreq), std::move(exchange));
  } catch (const std::exception& e) {
    // Boundary: a throwing handler is a bug; the client gets a bare 500, the log the reason.
    core_.log.log(LogLevel::error, "request {}: handler for {} threw: {}", request_id_, route.path, e.what());
    respond_error(seq_, internal_error(style_));
  } catch (...) {
    core_.log.log(LogLevel::error, "request {}: handler for {} threw a non-std exception", request_id_,
                  route.path);
    respond_error(seq_, internal_error(style_));
  }
}

// ---- disconnect watch: reads while a handler works, so a closed client is noticed at once ----

void Session::start_watch() {
  if (watch_pending_ || phase_ != Phase::handling || buffer_.size() >= kMaxWatchBufferBytes) return;
  watch_pending_ = true;
  socket_.async_read_some(buffer_.prepare(kReadChunkBytes),
                          [self = shared_from_this()](error_code ec, size_t n) { self->on_watch(ec, n); });
}

void Session::on_watch(error_code ec, size_t n) {
  watch_pending_ = false;
  if (!ec) buffer_.commit(n);  // the start of a pipelined request: kept for the next parse
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    if (ec && ec != net::error::operation_aborted) {
      client_gone("closed after its response");
      return;
    }
    read_request();
    return;
  }
  if (ec) {
    if (ec != net::error::operation_aborted)
      client_gone(ec == net::error::eof ? "client closed" : "read error");
    return;
  }
  start_watch();
}

// ---- writing ----

HeaderList Session::common_headers(bool keep_alive) const {
  HeaderList h;
  h.emplace_back("Server", "deepinfer");
  h.emplace_back("X-Request-Id", request_id_);
  h.emplace_back("Connection", keep_alive ? "keep-alive" : "close");
  return h;
}

void Session::respond_full(uint64_t seq, int http_status, std::string content_type, std::string body,
                           HeaderList extra_headers) {
  if (seq != seq_ || phase_ != Phase::handling || response_started_) return;
  if (shutdown_requested_) keep_alive_ = false;
  response_started_ = true;
  response_finished_ = true;
  response_status_ = http_status;
  HeaderList h = common_headers(keep_alive_);
  for (auto& kv : extra_headers) h.push_back(std::move(kv));
  h.emplace_back("Content-Type", std::move(content_type));
  h.emplace_back("Content-Length", std::to_string(body.size()));
  std::string bytes = response_head(http_status, h);
  bytes += body;
  enqueue(std::move(bytes));
}

void Session::respond_error(uint64_t seq, const HttpError& error) {
  if (error.http_status >= 500 && error.http_status != 503) {
    core_.log.log(LogLevel::warn, "request {}: {} {}", request_id_, error.http_status, error.message);
  }
  HeaderList h;
  if (error.retry_after_s > 0) h.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  if (error.http_status == 401) h.emplace_back("WWW-Authenticate", "Bearer");
  respond_full(seq, error.http_status, "application/json", error_body(error, style_), std::move(h));
}

void Session::stream_start(uint64_t seq, HeaderList extra_headers) {
  if (seq != seq_ || phase_ != Phase::handling || response_started_) return;
  if (shutdown_requested_) keep_alive_ = false;
  response_started_ = true;
  streaming_ = true;
  response_status_ = 200;
  HeaderList h = common_headers(keep_alive_);
  for (auto& kv : extra_headers) h.push_back(std::move(kv));
  h.emplace_back("Content-Type", "text/event-stream; charset=utf-8");
  h.emplace_back("Cache-Control", "no-cache");
  h.emplace_back("X-Accel-Buffering", "no");  // proxies (nginx) must not buffer the stream
  h.emplace_back("Transfer-Encoding", "chunked");
  enqueue(response_head(200, h));
}

void Session::stream_write(uint64_t seq, std::string event_text) {
  if (seq != seq_ || phase_ != Phase::handling || !streaming_ || response_finished_) return;
  enqueue(chunk_frame(event_text));
  if (unsent_bytes_ > core_.config.max_unsent_bytes) client_gone("too much unsent stream data (slow reader)");
}

void Session::stream_end(uint64_t seq) {
  if (seq != seq_ || phase_ != Phase::handling || response_finished_) return;
  if (!streaming_) {
    // end_stream() without start_stream(): an empty 200 stream keeps the protocol valid.
    stream_start(seq, {});
  }
  response_finished_ = true;
  enqueue(std::string(kLastChunk));
}

void Session::stream_fail(uint64_t seq, const HttpError& error) {
  if (seq != seq_ || phase_ != Phase::handling || response_finished_) return;
  if (!streaming_) {
    // The error came before any byte: a plain error response is clearer than a 200 stream.
    respond_error(seq, error);
    return;
  }
  if (error.http_status >= 500) {
    core_.log.log(LogLevel::warn, "request {}: stream error {} {}", request_id_, error.http_status,
                  error.message);
  }
  enqueue(chunk_frame(sse_error_event(error, style_)));
  response_finished_ = true;
  enqueue(std::string(kLastChunk));
}

void Session::exchange_abandoned(uint64_t seq) {
  if (seq != seq_ || phase_ != Phase::handling || response_finished_) return;
  core_.log.log(LogLevel::error, "request {}: handler dropped its response channel without answering",
                request_id_);
  if (streaming_) {
    stream_fail(seq, internal_error(style_));
  } else {
    respond_error(seq, internal_error(style_));
  }
}

void Session::enqueue(std::string bytes) {
  if (phase_ == Phase::closed || phase_ == Phase::closing) return;
  if (!bytes.empty()) {
    unsent_bytes_ += bytes.size();
    out_.push_back(std::move(bytes));
  }
  if (!writing_) do_write();
}

void Session::do_write() {
  if (out_.empty()) {
    if (response_finished_) finish_response();
    return;
  }
  // Gather everything queued into one write: a fast token stream becomes one syscall per batch, not
  // one per event.
  writing_ = true;
  in_flight_.clear();
  std::vector<net::const_buffer> buffers;
  while (!out_.empty() && in_flight_.size() < kMaxGatherBuffers) {
    in_flight_.push_back(std::move(out_.front()));
    out_.pop_front();
  }
  buffers.reserve(in_flight_.size());
  for (const std::string& b : in_flight_) buffers.emplace_back(net::buffer(b));
  arm_timer(core_.config.write_timeout);
  net::async_write(socket_, buffers,
                   [self = shared_from_this()](error_code ec, size_t n) { self->on_write(ec, n); });
}

void Session::on_write(error_code ec, size_t n) {
  writing_ = false;
  if (phase_ == Phase::closed) return;
  if (ec) {
    client_gone("write failed");
    return;
  }
  unsent_bytes_ -= n;
  in_flight_.clear();
  if (!out_.empty()) {
    do_write();
    return;
  }
  cancel_timer();
  if (response_finished_) finish_response();
}

void Session::finish_response() {
  if (phase_ != Phase::handling) return;
  if (core_.metrics != nullptr) {
    core_.metrics->record_http(route_label_, method_label_, response_status_,
                               static_cast<double>(now_ns() - started_ns_) * 1e-9);
  }
  exchange_.reset();
  self_.reset();
  if (!keep_alive_ || shutdown_requested_ || core_.shutting_down.load(std::memory_order_acquire)) {
    lingering_close();
    return;
  }
  phase_ = Phase::reading;
  if (watch_pending_) {
    // Cancelling the watch read is safe now: no write is pending. Its completion resumes reading.
    resume_after_watch_ = true;
    error_code ec;
    socket_.cancel(ec);
    return;
  }
  read_request();
}

// ---- closing ----

void Session::client_gone(const char* why) {
  if (phase_ == Phase::closed) return;
  if (phase_ == Phase::handling && !response_finished_) {
    core_.log.log(LogLevel::debug, "request {}: client gone ({})", request_id_, why);
  }
  if (auto ex = exchange_.lock()) ex->notify_closed();
  exchange_.reset();
  close_socket();
}

void Session::close_socket() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  cancel_timer();
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  out_.clear();
  unsent_bytes_ = 0;
  self_.reset();  // pending operations (now aborted) hold the last references
}

void Session::lingering_close() {
  // Closing with unread request bytes in the kernel buffer makes it send RST, which can destroy the
  // response we just wrote before the client reads it (e.g. a 413 for a large body). So: stop sending,
  // drain what the client still sends for a short while, then close.
  phase_ = Phase::closing;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) {
    close_socket();
    return;
  }
  arm_timer(kLingerTime);  // its expiry closes the socket
  linger_bytes_ = 0;
  linger_read();
}

void Session::linger_read() {
  buffer_.clear();
  socket_.async_read_some(
      buffer_.prepare(kReadChunkBytes), [self = shared_from_this()](error_code ec, size_t n) {
        self->linger_bytes_ += n;
        if (ec || self->phase_ != Phase::closing || self->linger_bytes_ > kLingerMaxBytes) {
          self->close_socket();
          return;
        }
        self->linger_read();
      });
}

// ---- the one timer ----

void Session::arm_timer(std::chrono::milliseconds after) {
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
    if (ec || gen != self->timer_gen_ || self->phase_ == Phase::closed) return;
    self->core_.log.log(LogLevel::debug, "connection {} timed out", self->remote_);
    // Closing aborts the pending read/write; their handlers see the error and clean up.
    self->client_gone("timeout");
  });
}

void Session::cancel_timer() {
  ++timer_gen_;
  timer_.cancel();
}

}  // namespace ds::server
