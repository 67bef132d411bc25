// A small blocking HTTP/1.1 client (Boost.Beast) for the tools that talk to an OpenAI-compatible
// server: bench serve and eval. One connection per call (the tools run one call per worker thread);
// a streamed (text/event-stream) answer is handed over event by event as it arrives, so the caller
// can time the tokens. Plain http only: the tools measure servers on a local or private network.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ds::client {

struct BaseUrl {
  std::string host;
  std::string port;         // "80" when the URL names none
  std::string path_prefix;  // "" or "/v1"-style, no trailing '/'
};

// "http://host[:port][/prefix]" -> BaseUrl; invalid_argument naming the problem otherwise.
Result<BaseUrl> parse_base_url(std::string_view url);

struct HttpAnswer {
  int status = 0;
  std::string content_type;
  std::string body;  // the whole body, except the events of a 2xx event stream (handed to on_event)
};

struct HttpCall {
  std::string method = "POST";
  std::string path;     // appended to the base URL's prefix
  std::string body;     // JSON; empty for GET
  std::string api_key;  // sent as "Authorization: Bearer ..." when not empty
  std::chrono::milliseconds timeout{
      600000};  // per step (connect, send, each read): a server silent this long fails the call
};

// Called with each SSE event's data (the "data:" lines joined by '\n'); return false to hang up.
using SseEventFn = std::function<bool(std::string_view data)>;

// Sends the call and reads the answer. io_error for a refused connection, a timeout or a broken
// stream. A non-2xx status is not an error here: the caller reads HttpAnswer::status.
Result<HttpAnswer> http_call(const BaseUrl& base, const HttpCall& call, const SseEventFn& on_event = {});

}  // namespace ds::client
