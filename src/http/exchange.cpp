#include "http/exchange.h"

#include <boost/asio/post.hpp>

#include "http/http_wire.h"

namespace ds::server {

Exchange::Exchange(std::shared_ptr<Liveness> liveness, std::weak_ptr<Session> session, uint64_t seq,
                   ErrorStyle style, std::string request_id, int retry_after_s)
    : liveness_(std::move(liveness)),
      session_(std::move(session)),
      seq_(seq),
      style_(style),
      request_id_(std::move(request_id)),
      retry_after_s_(retry_after_s) {}

Exchange::~Exchange() {
  if (finished_.load(std::memory_order_acquire)) return;
  const uint64_t seq = seq_;
  post([seq](Session& s) { s.exchange_abandoned(seq); });
}

template <class F>
void Exchange::post(F&& f) {
  // Holding the lock across the post keeps the io_context alive until the handler is queued; the server
  // flips `alive` under the same lock before destroying it.
  std::lock_guard lock(liveness_->mu);
  if (!liveness_->alive) return;
  std::shared_ptr<Session> session = session_.lock();
  if (!session) return;
  const net::any_io_executor executor = session->executor();
  net::post(executor, [s = std::move(session), fn = std::forward<F>(f)]() mutable { fn(*s); });
}

void Exchange::run_in_order(std::function<void()> work) {
  {
    std::lock_guard lock(liveness_->mu);  // as post(): the io_context lives until the work is queued
    if (liveness_->alive) {
      if (std::shared_ptr<Session> session = session_.lock()) {
        const net::any_io_executor executor = session->executor();
        net::post(executor, [s = std::move(session), w = std::move(work)] { w(); });
        return;
      }
    }
  }
  work();
}

void Exchange::send(int http_status, std::string content_type, std::string body, HeaderList extra_headers) {
  finished_.store(true, std::memory_order_release);
  post([seq = seq_, http_status, ct = std::move(content_type), b = std::move(body),
        h = std::move(extra_headers)](Session& s) mutable {
    s.respond_full(seq, http_status, std::move(ct), std::move(b), std::move(h));
  });
}

void Exchange::send_error(const Status& status) {
  send_http_error(http_error_from_status(status, style_, retry_after_s_));
}

void Exchange::send_http_error(const HttpError& error) {
  finished_.store(true, std::memory_order_release);
  post([seq = seq_, error](Session& s) { s.respond_error(seq, error); });
}

void Exchange::start_stream(HeaderList extra_headers) {
  post([seq = seq_, h = std::move(extra_headers)](Session& s) mutable { s.stream_start(seq, std::move(h)); });
}

void Exchange::write_event(std::string_view data, std::string_view event) {
  if (closed()) return;  // cheap early out; the session drops late writes anyway
  post([seq = seq_, text = sse_event_text(data, event)](Session& s) mutable {
    s.stream_write(seq, std::move(text));
  });
}

void Exchange::write_sse_bytes(std::string framed_events) {
  if (closed() || framed_events.empty()) return;
  post([seq = seq_, text = std::move(framed_events)](Session& s) mutable {
    s.stream_write(seq, std::move(text));
  });
}

void Exchange::stream_error(const Status& status) {
  finished_.store(true, std::memory_order_release);
  post([seq = seq_, error = http_error_from_status(status, style_, retry_after_s_)](Session& s) {
    s.stream_fail(seq, error);
  });
}

void Exchange::end_stream() {
  finished_.store(true, std::memory_order_release);
  post([seq = seq_](Session& s) { s.stream_end(seq); });
}

void Exchange::on_close(std::function<void()> callback) {
  {
    std::lock_guard lock(callback_mu_);
    if (!close_notified_) {
      on_close_ = std::move(callback);
      return;
    }
  }
  callback();  // already closed: run now, on the caller's thread
}

void Exchange::notify_closed() {
  closed_.store(true, std::memory_order_release);
  std::function<void()> callback;
  {
    std::lock_guard lock(callback_mu_);
    if (close_notified_) return;
    close_notified_ = true;
    callback = std::move(on_close_);
  }
  if (callback) callback();
}

}  // namespace ds::server
