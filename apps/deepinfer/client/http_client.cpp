#include "client/http_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>

#include "client/sse_reader.h"

namespace ds::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<BaseUrl> parse_base_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    return Status(ErrorCode::invalid_argument,
                  "--base-url must start with http:// (https is not supported): '" + std::string(url) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (authority.empty()) return Status(ErrorCode::invalid_argument, "--base-url has no host");
  BaseUrl out;
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    out.host = std::string(authority.substr(0, colon));
    out.port = std::string(authority.substr(colon + 1));
    if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
      return Status(ErrorCode::invalid_argument,
                    "--base-url has a bad port: '" + std::string(authority) + "'");
  } else {
    out.host = std::string(authority);
    out.port = "80";
  }
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  out.path_prefix = std::string(path);
  return out;
}

namespace {

// A read or connect that passed the deadline fails with beast::error::timeout: say so in words.
Status io_error(const std::string& what, const beast::error_code& ec) {
  const bool timed_out = ec == beast::error::timeout;
  return Status(ErrorCode::io_error, what + ": " + (timed_out ? std::string("timed out") : ec.message()));
}

// Runs one asynchronous operation on the call's own io_context to completion. The blocking
// calls of Asio have no deadline (a receive timeout on the socket is retried internally), so
// every step is an async operation on a beast::tcp_stream whose expiry cancels it.
template <class Start>
beast::error_code run_op(asio::io_context& io, Start start) {
  beast::error_code result = asio::error::operation_aborted;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

}  // namespace

Result<HttpAnswer> http_call(const BaseUrl& base, const HttpCall& call, const SseEventFn& on_event) {
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto endpoints = resolver.resolve(base.host, base.port, ec);
  if (ec) return io_error("resolve " + base.host, ec);
  beast::tcp_stream stream(io);
  stream.expires_after(call.timeout);
  ec = run_op(io, [&](auto done) { stream.async_connect(endpoints, done); });
  if (ec) return io_error("connect " + base.host + ":" + base.port, ec);
  stream.socket().set_option(tcp::no_delay(true), ec);

  http::request<http::string_body> req(call.method == "GET" ? http::verb::get : http::verb::post,
                                       base.path_prefix + call.path, 11);
  req.set(http::field::host, base.host);
  req.set(http::field::user_agent, "deepinfer-client");
  req.set(http::field::accept, "application/json, text/event-stream");
  if (!call.api_key.empty()) req.set(http::field::authorization, "Bearer " + call.api_key);
  if (!call.body.empty() || call.method != "GET") {
    req.set(http::field::content_type, "application/json");
    req.body() = call.body;
    req.prepare_payload();
  }
  stream.expires_after(call.timeout);
  ec = run_op(io, [&](auto done) { http::async_write(stream, req, done); });
  if (ec) return io_error("send request", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  stream.expires_after(call.timeout);
  ec = run_op(io, [&](auto done) { http::async_read_header(stream, buffer, parser, done); });
  if (ec) return io_error("read response header", ec);
  HttpAnswer answer;
  answer.status = static_cast<int>(parser.get().result_int());
  answer.content_type = std::string(parser.get()[http::field::content_type]);
  const bool sse = answer.status / 100 == 2 && answer.content_type.starts_with("text/event-stream");
  bool hung_up = false;
  SseReader reader([&](std::string_view data) {
    if (on_event && !on_event(data)) hung_up = true;
    return !hung_up;
  });
  char chunk[16384];
  while (!parser.is_done() && !hung_up) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    stream.expires_after(call.timeout);  // per read: a long stream is fine while tokens keep coming
    // read_some: what has arrived, so chunks are timed as they come.
    ec = run_op(io, [&](auto done) { http::async_read_some(stream, buffer, parser, done); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return io_error("read response body", ec);
    const std::string_view got(chunk, sizeof(chunk) - parser.get().body().size);
    if (sse) {
      reader.feed(got);
    } else {
      answer.body.append(got);
    }
  }
  stream.socket().shutdown(tcp::socket::shutdown_both,
                           ec);  // a hang-up mid-stream tells the server to cancel
  return answer;
}

}  // namespace ds::client
