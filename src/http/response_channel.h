// How a handler answers: either one complete response, or a Server-Sent Events stream written
// incrementally. Every method may be called from any thread (e.g. an engine event sink); the work is
// posted to the connection's io thread, so the calls never block on the network.
//
// Exactly one of send()/send_error()/start_stream() starts the response; later starts are ignored
// (debug log). A stream ends with end_stream() or stream_error(). A channel dropped without a finished
// response answers 500 (a handler bug must not hang the client).
//
// Disconnects: closed() turns true, and the on_close callback runs once, when the client goes away
// (EOF, reset, write timeout, too much unsent data) or the server shuts down before the response
// finished. The callback runs on an io thread: it must not block (cancel the engine request and return).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/http_error.h"

namespace ds::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;

  virtual void send(int http_status, std::string content_type, std::string body,
                    HeaderList extra_headers = {}) = 0;
  void send_json(int http_status, std::string json_body) {
    send(http_status, "application/json", std::move(json_body));
  }
  // The route's error style decides the body shape; 429/503 get Retry-After.
  virtual void send_error(const Status& status) = 0;
  virtual void send_http_error(const HttpError& error) = 0;

  // 200 with Content-Type text/event-stream (chunked), then events.
  virtual void start_stream(HeaderList extra_headers = {}) = 0;
  // "data: <data>\n\n", or with `event` non-empty "event: <event>\ndata: <data>\n\n". `data` must not
  // contain a newline (JSON from dump() never does); one that does is split over several data: lines.
  virtual void write_event(std::string_view data, std::string_view event = {}) = 0;
  // Whole SSE events already framed elsewhere ("data: ...\n\n" or "event: ...\ndata: ...\n\n"), e.g.
  // relayed from a worker by the router: sent as they are, never re-framed.
  virtual void write_sse_bytes(std::string framed_events) = 0;
  // The error as an SSE event in the route's style, then the end of the stream.
  virtual void stream_error(const Status& status) = 0;
  virtual void end_stream() = 0;

  // True once the client is gone or the server is shutting down (writes are then dropped).
  virtual bool closed() const = 0;
  // Runs once when closed() turns true before the response finished; runs at once if already closed.
  virtual void on_close(std::function<void()> callback) = 0;

  virtual ErrorStyle error_style() const = 0;
  virtual const std::string& request_id() const = 0;

  // Runs `work` on the connection's io thread (its strand), after everything posted through this
  // channel before it, so a producer thread (the engine's) only queues: calls made from one thread
  // run in the order made. When the connection or the server is already gone, runs it at once on the
  // caller's thread (its writes are dropped then, its bookkeeping still happens). Work still queued
  // when the server stops for good is dropped unrun.
  virtual void run_in_order(std::function<void()> work) = 0;
};

}  // namespace ds::server
