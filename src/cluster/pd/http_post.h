// A blocking HTTP/1.1 POST to a peer server (the decode service asking a prefill server to start a
// transfer): one connection per call, every step bounded by the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "base/status.h"

namespace ds::pd {

struct HttpReply {
  int status = 0;
  std::string body;
};

// url: "http://HOST:PORT" (the path is appended). transport_io when the peer cannot be reached or
// answers garbage, transport_timeout past the timeout, engine_cancelled soon after *cancel turns true
// (the connection is closed: the peer sees its client go away). `api_key` (if not empty) goes as
// "Authorization: Bearer <api_key>".
Result<HttpReply> http_post_json(const std::string& url, const std::string& path, const std::string& body,
                                 std::chrono::milliseconds timeout, const std::atomic<bool>* cancel = nullptr,
                                 const std::string& api_key = {});

}  // namespace ds::pd
