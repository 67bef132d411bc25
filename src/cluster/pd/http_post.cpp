#include "cluster/pd/http_post.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace ds::pd {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

Result<HttpReply> http_post_json(const std::string& url, const std::string& path, const std::string& body,
                                 std::chrono::milliseconds timeout, const std::atomic<bool>* cancel,
                                 const std::string& api_key) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return Status(ErrorCode::invalid_argument, "not an http:// URL: " + url);
  std::string hostport = url.substr(kScheme.size());
  if (const size_t slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  const size_t colon = hostport.rfind(':');
  if (colon == std::string::npos) return Status(ErrorCode::invalid_argument, "no port in " + url);
  const std::string host = hostport.substr(0, colon);
  const std::string port = hostport.substr(colon + 1);

  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Status(ErrorCode::transport_io, "resolve " + hostport + ": " + ec.message());
  // Synchronous Beast calls ignore expires_after: run async operations with a bounded run_for.
  HttpReply reply;
  bool finished = false;
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, hostport);
  req.set(http::field::content_type, "application/json");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  stream.expires_after(timeout);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) {
      ec = e;
      return;
    }
    http::async_write(stream, req, [&](beast::error_code e2, size_t) {
      if (e2) {
        ec = e2;
        return;
      }
      http::async_read(stream, buffer, res, [&](beast::error_code e3, size_t) {
        ec = e3;
        finished = !e3;
      });
    });
  });
  bool cancelled = false;
  while (!ioc.stopped()) {
    ioc.run_for(std::chrono::milliseconds(20));
    if (!cancelled && cancel != nullptr && cancel->load()) {
      cancelled = true;
      stream.cancel();  // the handlers run with operation_aborted; the loop then stops
    }
  }
  if (cancelled && !finished)
    return Status(ErrorCode::engine_cancelled, "POST " + url + path + ": cancelled");
  if (!finished) {
    if (ec == beast::error::timeout)
      return Status(ErrorCode::transport_timeout, "POST " + url + path + ": no answer in time");
    return Status(ErrorCode::transport_io, "POST " + url + path + ": " + ec.message());
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  reply.status = static_cast<int>(res.result_int());
  reply.body = std::move(res.body());
  return reply;
}

}  // namespace ds::pd
