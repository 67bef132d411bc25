// Exchange: the ResponseChannel of one request. It forwards every call onto its Session's strand and
// keeps the client-gone state the handler reads from other threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/http_session.h"
#include "http/response_channel.h"

namespace ds::server {

class Exchange final : public ResponseChannel {
 public:
  Exchange(std::shared_ptr<Liveness> liveness, std::weak_ptr<Session> session, uint64_t seq, ErrorStyle style,
           std::string request_id, int retry_after_s);
  ~Exchange() override;

  void send(int http_status, std::string content_type, std::string body, HeaderList extra_headers) override;
  void send_error(const Status& status) override;
  void send_http_error(const HttpError& error) override;
  void start_stream(HeaderList extra_headers) override;
  void write_event(std::string_view data, std::string_view event) override;
  void write_sse_bytes(std::string framed_events) override;
  void stream_error(const Status& status) override;
  void end_stream() override;
  bool closed() const override { return closed_.load(std::memory_order_acquire); }
  void on_close(std::function<void()> callback) override;
  ErrorStyle error_style() const override { return style_; }
  const std::string& request_id() const override { return request_id_; }
  void run_in_order(std::function<void()> work) override;

  // Session side (on its strand): the client went away or the server is stopping.
  void notify_closed();

 private:
  // Runs f(session) on the session's strand, if the server and the session still exist.
  template <class F>
  void post(F&& f);

  std::shared_ptr<Liveness> liveness_;
  std::weak_ptr<Session> session_;
  const uint64_t seq_;
  const ErrorStyle style_;
  const std::string request_id_;
  const int retry_after_s_;
  std::atomic<bool> finished_{false};  // the handler sent a whole response or ended its stream
  std::atomic<bool> closed_{false};
  std::mutex callback_mu_;  // guards on_close_ and close_notified_
  std::function<void()> on_close_;
  bool close_notified_ = false;
};

}  // namespace ds::server
