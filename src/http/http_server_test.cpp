// Black-box tests of HttpServer over real loopback sockets with stub handlers: protocol handling,
// limits, timeouts, SSE and disconnects, auth, error shapes, metrics and shutdown.
#include "http/http_server.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "http/test_http_client.h"
#include "http/test_prometheus_parser.h"

namespace ds::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ParsedResponse;
using testing::RawConnection;

std::string get(std::string_view path, std::string_view extra = "") {
  return fmt::format("GET {} HTTP/1.1\r\nHost: t\r\n{}\r\n", path, extra);
}

std::string post(std::string_view path, std::string_view body, std::string_view extra = "") {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{}", path,
      body.size(), extra, body);
}

// Shared state the stub handlers report into.
struct Probe {
  std::promise<void> stream_closed;
  std::atomic<int> events_written{0};
  std::promise<std::shared_ptr<ResponseChannel>> parked;  // a channel the test keeps open
  std::promise<void> parked_closed;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void start(ServerConfig config) {
    config.host = "127.0.0.1";
    config.port = 0;
    RouteTable router;
    RouteOptions anthropic{ErrorStyle::anthropic, RouteAccess::api_key};
    RouteOptions operational{ErrorStyle::openai, RouteAccess::operational};
    RouteOptions admin{ErrorStyle::openai, RouteAccess::admin};
    ASSERT_TRUE(router
                    .add("GET", "/health", operational,
                         [](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->send(200, "text/plain", "ok");
                         })
                    .ok());
    ASSERT_TRUE(router
                    .add("GET", "/metrics", operational,
                         [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->send(200, "text/plain; version=0.0.4", registry_.render());
                         })
                    .ok());
    // Echo: parses the body as JSON (errors -> 400 with the field) and returns what it saw.
    ASSERT_TRUE(router
                    .add("POST", "/v1/chat/completions", {},
                         [](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                           json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
                           if (j.is_discarded()) {
                             out->send_error(Status(ErrorCode::invalid_argument, "body: not valid JSON"));
                             return;
                           }
                           if (!j.contains("model") || !j["model"].is_string()) {
                             out->send_error(Status(ErrorCode::invalid_argument, "model: required string"));
                             return;
                           }
                           json r = {{"model", j["model"]},
                                     {"bytes", req.body.size()},
                                     {"request_id", req.request_id},
                                     {"query", req.query},
                                     {"header_x_test", std::string(req.header("X-Test").value_or(""))}};
                           out->send_json(200, r.dump(-1, ' ', false, json::error_handler_t::replace));
                         })
                    .ok());
    // Bytes: answers with the body's length and whether it is byte-identical to what the test sent.
    ASSERT_TRUE(router
                    .add("POST", "/v1/completions", {},
                         [](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                           out->send(200, "application/octet-stream", req.body);
                         })
                    .ok());
    ASSERT_TRUE(router
                    .add("POST", "/v1/messages", anthropic,
                         [](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->start_stream();
                           out->write_event(R"({"type":"message_start"})", "message_start");
                           out->stream_error(Status(ErrorCode::engine_overloaded, "queue full"));
                         })
                    .ok());
    // Error by code in the query: /v1/responses?code=6001.
    ASSERT_TRUE(router
                    .add("POST", "/v1/responses", {},
                         [](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                           const int code = std::stoi(req.query.substr(req.query.find('=') + 1));
                           out->send_error(
                               Status(static_cast<ErrorCode>(code), "detail /secret/internal/path"));
                         })
                    .ok());
    // A stream fed from another thread until the client goes away.
    ASSERT_TRUE(router
                    .add("POST", "/stream", {},
                         [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->on_close([this] { probe_.stream_closed.set_value(); });
                           out->start_stream();
                           std::thread([this, out] {
                             for (int i = 0; i < 3000 && !out->closed(); ++i) {
                               out->write_event(json{{"i", i}}.dump());
                               probe_.events_written.fetch_add(1);
                               std::this_thread::sleep_for(2ms);
                             }
                             out->end_stream();
                           }).detach();
                         })
                    .ok());
    // A finite stream: 5 events then [DONE].
    ASSERT_TRUE(router
                    .add("GET", "/stream5", {},
                         [](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->start_stream({{"X-Extra", "1"}});
                           std::thread([out] {
                             for (int i = 0; i < 5; ++i) out->write_event(json{{"i", i}}.dump());
                             out->write_event("[DONE]");
                             out->end_stream();
                           }).detach();
                         })
                    .ok());
    // Work queued from a producer thread with run_in_order: it must run in order, off the producer's thread.
    ASSERT_TRUE(router
                    .add("GET", "/ordered", {},
                         [](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->start_stream();
                           std::thread([out] {
                             struct Seen {
                               std::vector<int> order;
                               bool off_producer = true;
                             };
                             auto seen = std::make_shared<Seen>();  // touched only by the queued work
                             const std::thread::id producer = std::this_thread::get_id();
                             for (int i = 0; i < 200; ++i) {
                               out->run_in_order([seen, i, producer] {
                                 seen->order.push_back(i);
                                 if (std::this_thread::get_id() == producer) seen->off_producer = false;
                               });
                             }
                             out->run_in_order([out, seen] {
                               out->write_event(
                                   json{{"order", seen->order}, {"off_producer", seen->off_producer}}.dump());
                               out->end_stream();
                             });
                           }).detach();
                         })
                    .ok());
    // Keeps the channel unanswered (the test decides what happens).
    ASSERT_TRUE(router
                    .add("POST", "/park", {},
                         [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->on_close([this] { probe_.parked_closed.set_value(); });
                           probe_.parked.set_value(out);
                         })
                    .ok());
    ASSERT_TRUE(router
                    .add("GET", "/throw", {},
                         [](ServerRequest, std::shared_ptr<ResponseChannel>) {
                           throw std::runtime_error("handler bug with /secret detail");
                         })
                    .ok());
    ASSERT_TRUE(router.add("GET", "/drop", {}, [](ServerRequest, std::shared_ptr<ResponseChannel>) {}).ok());
    ASSERT_TRUE(router
                    .add("POST", "/admin/reload", admin,
                         [](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                           out->send(200, "text/plain", "reloaded");
                         })
                    .ok());
    auto server = HttpServer::start(std::move(config), std::move(router), Logger(LogLevel::error), &metrics_);
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }

  RawConnection connect() {
    RawConnection c = RawConnection::connect_local(server_->port());
    EXPECT_TRUE(c.ok());
    return c;
  }

  ParsedResponse roundtrip(const std::string& request) {
    RawConnection c = connect();
    EXPECT_TRUE(c.send_all(request));
    auto r = c.read_response();
    EXPECT_TRUE(r.has_value()) << "no response to: " << request.substr(0, 80);
    return r.value_or(ParsedResponse{});
  }

  MetricsRegistry registry_;
  ServingMetrics metrics_{registry_};
  Probe probe_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, ServesAndEchoesRequestIds) {
  start({});
  ParsedResponse r = roundtrip(get("/health"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_TRUE(r.header("x-request-id").starts_with("req-")) << r.header("x-request-id");
  r = roundtrip(get("/health", "X-Request-Id: client-id-123\r\n"));
  EXPECT_EQ(r.header("x-request-id"), "client-id-123");
  // An id with characters that could forge log lines is replaced, not echoed.
  r = roundtrip(get("/health", "X-Request-Id: a b\"c\r\n"));
  EXPECT_TRUE(r.header("x-request-id").starts_with("req-"));
}

TEST_F(HttpServerTest, KeepAliveServesSequentialRequestsOnOneConnection) {
  start({});
  RawConnection c = connect();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.send_all(post("/v1/chat/completions", fmt::format(R"({{"model":"m{}"}})", i))));
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["model"], fmt::format("m{}", i));
    EXPECT_EQ(r->header("connection"), "keep-alive");
  }
  EXPECT_EQ(server_->n_open_connections(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  start({});
  RawConnection c = connect();
  std::string burst;
  for (int i = 0; i < 4; ++i) burst += post("/v1/chat/completions", fmt::format(R"({{"model":"p{}"}})", i));
  burst += get("/health");
  ASSERT_TRUE(c.send_all(burst));
  for (int i = 0; i < 4; ++i) {
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(json::parse(r->body)["model"], fmt::format("p{}", i));
  }
  auto last = c.read_response();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->body, "ok");
}

TEST_F(HttpServerTest, UnknownRoute404AndWrongMethod405HaveApiShapedBodies) {
  start({});
  ParsedResponse r = roundtrip(get("/v1/nope"));
  EXPECT_EQ(r.status, 404);
  json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "not_found");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"].contains("param"));

  r = roundtrip(get("/v1/messages/unknown"));
  EXPECT_EQ(r.status, 404);
  body = json::parse(r.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "not_found_error");

  r = roundtrip(get("/v1/chat/completions"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "POST");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "method_not_allowed");
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413) {
  ServerConfig config;
  config.max_body_bytes = 1000;
  start(config);
  // Declared length over the limit: refused from the header, before the body is read.
  ParsedResponse r = roundtrip(post("/v1/completions", std::string(5000, 'x')));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "payload_too_large");
  EXPECT_EQ(r.header("connection"), "close");
  // Chunked body that grows past the limit.
  RawConnection c = connect();
  ASSERT_TRUE(c.send_all("POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.send_all("190\r\n" + std::string(400, 'y') + "\r\n"));
  auto chunked = c.read_response();
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 413);
  // On an Anthropic route the 413 comes in Anthropic's shape, also when refused from the header.
  r = roundtrip(post("/v1/messages", std::string(5000, 'x')));
  EXPECT_EQ(r.status, 413);
  const json anthropic_body = json::parse(r.body);
  EXPECT_EQ(anthropic_body["type"], "error");
  EXPECT_EQ(anthropic_body["error"]["type"], "request_too_large");
  // At the limit exactly: accepted, byte-identical.
  r = roundtrip(post("/v1/completions", std::string(1000, 'z')));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(1000, 'z'));
}

TEST_F(HttpServerTest, MalformedHttpIs400AndCloses) {
  start({});
  for (const std::string& bad : {std::string("GARBAGE\r\n\r\n"), std::string("GET / HTTP/9.9\r\n\r\n"),
                                 std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
                                 std::string("GET /health HTTP/1.1\r\nBad Header\r\n\r\n")}) {
    RawConnection c = connect();
    ASSERT_TRUE(c.send_all(bad));
    auto r = c.read_response();
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "bad_http_request");
    EXPECT_TRUE(c.wait_closed(2s)) << bad;
  }
}

TEST_F(HttpServerTest, TooManyOrTooLargeHeadersAre431) {
  ServerConfig config;
  config.max_header_count = 10;
  config.max_header_bytes = 2048;
  start(config);
  std::string many;
  for (int i = 0; i < 20; ++i) many += fmt::format("X-H{}: v\r\n", i);
  EXPECT_EQ(roundtrip(get("/health", many)).status, 431);
  EXPECT_EQ(roundtrip(get("/health", "X-Big: " + std::string(4000, 'a') + "\r\n")).status, 431);
  EXPECT_EQ(roundtrip(get("/health", "X-Ok: 1\r\n")).status, 200);
}

TEST_F(HttpServerTest, BadJsonAndInvalidUtf8ReachTheHandlerUnchanged) {
  start({});
  ParsedResponse r = roundtrip(post("/v1/chat/completions", "{not json"));
  EXPECT_EQ(r.status, 400);
  json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["param"], "body");
  r = roundtrip(post("/v1/chat/completions", R"({"messages":[]})"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "model");
  // Invalid UTF-8 is the handler's business: the server passes the bytes through untouched.
  const std::string raw = std::string("{\"model\":\"\xff\xfe\xc3\x28\"}") + std::string("\0\x01", 2);
  r = roundtrip(post("/v1/completions", raw));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, raw);
  // A JSON handler rejects invalid UTF-8 as bad JSON: a 400 whose body is itself valid JSON.
  r = roundtrip(post("/v1/chat/completions", "{\"model\":\"\xff\xfe\"}"));
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(json::accept(r.body)) << r.body;
}

TEST_F(HttpServerTest, QueryAndHeadersArePassedToHandlers) {
  start({});
  ParsedResponse r = roundtrip(post("/v1/chat/completions?x=1&y=2", R"({"model":"m"})", "x-test: hello\r\n"));
  ASSERT_EQ(r.status, 200);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["query"], "x=1&y=2");
  EXPECT_EQ(body["header_x_test"], "hello");
  EXPECT_EQ(body["request_id"], r.header("x-request-id"));
}

TEST_F(HttpServerTest, ExpectContinueIsHonoured) {
  start({});
  RawConnection c = connect();
  const std::string body = R"({"model":"cont"})";
  ASSERT_TRUE(
      c.send_all(fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                             "Content-Length: {}\r\n\r\n",
                             body.size())));
  ASSERT_TRUE(c.read_until("100 Continue", 5s));
  ASSERT_TRUE(c.send_all(body));
  auto r = c.read_response();  // skips the 100
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["model"], "cont");
}

TEST_F(HttpServerTest, SlowlorisAndIdleConnectionsAreClosedByTimeouts) {
  ServerConfig config;
  config.idle_timeout = 300ms;
  config.request_read_timeout = 400ms;
  start(config);
  // Idle: never sends a byte.
  RawConnection idle = connect();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.wait_closed(5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  // Slowloris: a header byte every 50 ms never completes within the request timeout.
  RawConnection slow = connect();
  const std::string head =
      "GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  bool cut_off = false;
  const auto t1 = std::chrono::steady_clock::now();
  for (char ch : head) {
    if (!slow.send_all(std::string(1, ch))) {
      cut_off = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
    if (std::chrono::steady_clock::now() - t1 > 3s) break;
  }
  EXPECT_TRUE(cut_off || slow.wait_closed(2s));
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 3s);
  // The server still works.
  EXPECT_EQ(roundtrip(get("/health")).status, 200);
}

TEST_F(HttpServerTest, ThousandIdleConnectionsDoNotCostThreads) {
  // 1,000 connections need 2,000 descriptors in this process (both ends): raise the soft limit.
  rlimit fds{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &fds), 0);
  if (fds.rlim_cur < 2200) {
    if (fds.rlim_max < 2200) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << fds.rlim_max << " < 2200";
    fds.rlim_cur = fds.rlim_max;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &fds), 0);
  }
  ServerConfig config;
  config.n_io_threads = 2;
  start(config);
  const int threads_before = testing::count_process_threads();
  std::vector<RawConnection> idle;
  idle.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(connect());
    ASSERT_TRUE(idle.back().ok()) << i;
  }
  // Half of them send a request and stay open (keep-alive): they are idle again afterwards.
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(idle[i].send_all(get("/health")));
  for (int i = 0; i < 1000; i += 2) {
    auto r = idle[i].read_response();
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->status, 200);
  }
  for (int i = 0; i < 200 && server_->n_open_connections() < 1000; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server_->n_open_connections(), 1000u);
  // A new client is still served promptly.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(roundtrip(post("/v1/chat/completions", R"({"model":"busy"})")).status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(testing::count_process_threads(), threads_before);
  EXPECT_EQ(server_->n_io_threads(), 2);
}

TEST_F(HttpServerTest, ConnectionCapAnswers503) {
  ServerConfig config;
  config.max_connections = 3;
  start(config);
  std::vector<RawConnection> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect());
  for (int i = 0; i < 200 && server_->n_open_connections() < 3; ++i) std::this_thread::sleep_for(5ms);
  RawConnection extra = connect();
  auto r = extra.read_response(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("retry-after"), "1");
}

TEST_F(HttpServerTest, SseStreamIsChunkedEventStream) {
  start({});
  ParsedResponse r = roundtrip(get("/stream5"));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.chunked);
  EXPECT_TRUE(r.header("content-type").starts_with("text/event-stream"));
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  EXPECT_EQ(r.header("x-extra"), "1");
  const auto events = testing::parse_sse(r.body);
  ASSERT_EQ(events.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(json::parse(events[i].data)["i"], i);
  EXPECT_EQ(events[5].data, "[DONE]");
}

TEST_F(HttpServerTest, RunInOrderRunsQueuedWorkInOrderOnTheIoThread) {
  start({});
  ParsedResponse r = roundtrip(get("/ordered"));
  EXPECT_EQ(r.status, 200);
  const auto events = testing::parse_sse(r.body);
  ASSERT_EQ(events.size(), 1u) << r.body;
  const json seen = json::parse(events[0].data);
  std::vector<int> want(200);
  for (int i = 0; i < 200; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(seen["order"].get<std::vector<int>>(), want);
  EXPECT_EQ(seen["off_producer"], true);
}

TEST_F(HttpServerTest, StreamedRequestsKeepTheConnectionUsable) {
  start({});
  RawConnection c = connect();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send_all(get("/stream5")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(testing::parse_sse(r->body).size(), 6u);
  }
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamReachesTheHandler) {
  start({});
  auto closed = probe_.stream_closed.get_future();
  {
    RawConnection c = connect();
    ASSERT_TRUE(c.send_all(post("/stream", "{}")));
    ASSERT_TRUE(c.read_until("data: {\"i\":3}", 5s));
  }  // the client closes its socket here
  ASSERT_EQ(closed.wait_for(5s), std::future_status::ready) << "handler never learned the client left";
  const int written_at_close = probe_.events_written.load();
  std::this_thread::sleep_for(100ms);
  // The producer stopped (it checks closed()): far fewer than the 3000 events it would otherwise write.
  EXPECT_LT(probe_.events_written.load(), 3000);
  EXPECT_LE(probe_.events_written.load() - written_at_close, 2);
}

TEST_F(HttpServerTest, ClientDisconnectBeforeAnyResponseReachesTheHandler) {
  start({});
  auto parked = probe_.parked.get_future();
  auto closed = probe_.parked_closed.get_future();
  {
    RawConnection c = connect();
    ASSERT_TRUE(c.send_all(post("/park", "{}")));
    ASSERT_EQ(parked.wait_for(5s), std::future_status::ready);
  }
  ASSERT_EQ(closed.wait_for(5s), std::future_status::ready);
  auto channel = parked.get();
  EXPECT_TRUE(channel->closed());
  channel->send(200, "text/plain", "too late");  // harmless
  bool ran = false;
  channel->on_close([&] { ran = true; });  // registered after the fact: runs at once
  EXPECT_TRUE(ran);
}

TEST_F(HttpServerTest, ErrorsAfterTheStreamStartedAreSseErrorEvents) {
  start({});
  ParsedResponse r = roundtrip(post("/v1/messages", "{}"));
  EXPECT_EQ(r.status, 200);
  const auto events = testing::parse_sse(r.body);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "message_start");
  EXPECT_EQ(events[1].event, "error");
  const json err = json::parse(events[1].data);
  EXPECT_EQ(err["type"], "error");
  EXPECT_EQ(err["error"]["type"], "overloaded_error");
  EXPECT_EQ(err["error"]["message"], "queue full");
}

TEST_F(HttpServerTest, StatusMappingRetryAfterAndNoLeaks) {
  start({});
  struct Case {
    ErrorCode code;
    int http_status;
    const char* retry_after;
  };
  for (const Case& c :
       {Case{ErrorCode::engine_overloaded, 429, "1"}, Case{ErrorCode::engine_shutting_down, 503, "1"},
        Case{ErrorCode::engine_bad_request, 400, ""}, Case{ErrorCode::internal, 500, ""},
        Case{ErrorCode::io_error, 500, ""}}) {
    ParsedResponse r = roundtrip(post(fmt::format("/v1/responses?code={}", static_cast<int>(c.code)), "{}"));
    EXPECT_EQ(r.status, c.http_status) << error_code_name(c.code);
    EXPECT_EQ(r.header("retry-after"), c.retry_after) << error_code_name(c.code);
    const json body = json::parse(r.body);
    EXPECT_TRUE(body["error"]["message"].is_string());
    if (c.http_status == 500) {
      EXPECT_EQ(r.body.find("secret"), std::string::npos) << r.body;
    }
  }
}

TEST_F(HttpServerTest, ThrowingOrSilentHandlersGive500) {
  start({});
  ParsedResponse r = roundtrip(get("/throw"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  EXPECT_EQ(roundtrip(get("/drop")).status, 500);
  EXPECT_EQ(roundtrip(get("/health")).status, 200);
}

TEST_F(HttpServerTest, ApiKeys) {
  ServerConfig config;
  auto keys = ApiKeySet::from_keys({"sk-alpha", "sk-beta"});
  ASSERT_TRUE(keys.ok());
  config.api_keys = *keys;
  start(config);
  const std::string body = R"({"model":"m"})";
  ParsedResponse r = roundtrip(post("/v1/chat/completions", body));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Bearer");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(roundtrip(post("/v1/chat/completions", body, "Authorization: Bearer sk-alpha\r\n")).status, 200);
  EXPECT_EQ(roundtrip(post("/v1/chat/completions", body, "x-api-key: sk-beta\r\n")).status, 200);
  EXPECT_EQ(roundtrip(post("/v1/chat/completions", body, "Authorization: Bearer sk-alph\r\n")).status, 401);
  // Bearer wins when both are sent.
  EXPECT_EQ(
      roundtrip(post("/v1/chat/completions", body, "Authorization: Bearer wrong\r\nx-api-key: sk-beta\r\n"))
          .status,
      401);
  // Anthropic route: Anthropic-shaped 401.
  r = roundtrip(post("/v1/messages", "{}"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "authentication_error");
  EXPECT_EQ(json::parse(r.body)["type"], "error");
  // Operational routes stay open; unknown routes are still 404 (not 401: nothing to protect).
  EXPECT_EQ(roundtrip(get("/health")).status, 200);
  EXPECT_EQ(roundtrip(get("/metrics")).status, 200);
}

TEST_F(HttpServerTest, OperationalRoutesCanRequireAKey) {
  ServerConfig config;
  config.api_keys = *ApiKeySet::from_keys({"sk-alpha"});
  config.operational_routes_need_key = true;
  start(config);
  EXPECT_EQ(roundtrip(get("/health")).status, 401);
  EXPECT_EQ(roundtrip(get("/health", "Authorization: Bearer sk-alpha\r\n")).status, 200);
}

TEST_F(HttpServerTest, AdminRoutesAreOffUnlessEnabled) {
  start({});
  EXPECT_EQ(roundtrip(post("/admin/reload", "")).status, 404);
  server_.reset();
  ServerConfig config;
  config.enable_admin_routes = true;
  start(config);
  EXPECT_EQ(roundtrip(post("/admin/reload", "")).status, 200);
}

TEST_F(HttpServerTest, AdminKeysAreApartFromClientKeys) {
  ServerConfig config;
  config.enable_admin_routes = true;
  config.api_keys = *ApiKeySet::from_keys({"sk-alpha"});
  config.admin_api_keys = *ApiKeySet::from_keys({"sk-admin"});
  start(config);
  ParsedResponse none = roundtrip(post("/admin/reload", ""));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["error"]["type"], "authentication_error");
  ParsedResponse client = roundtrip(post("/admin/reload", "", "Authorization: Bearer sk-alpha\r\n"));
  EXPECT_EQ(client.status, 403) << "a client key is known but not allowed";
  EXPECT_EQ(json::parse(client.body)["error"]["type"], "permission_error");
  EXPECT_EQ(roundtrip(post("/admin/reload", "", "x-api-key: sk-wrong\r\n")).status, 401);
  EXPECT_EQ(roundtrip(post("/admin/reload", "", "x-api-key: sk-admin\r\n")).status, 200);
  // The admin key is not a client key.
  EXPECT_EQ(roundtrip(post("/v1/chat/completions", R"({"model":"m"})", "x-api-key: sk-admin\r\n")).status,
            401);
}

TEST_F(HttpServerTest, MetricsTextParsesAndCountsRoutes) {
  start({});
  for (int i = 0; i < 3; ++i) roundtrip(get("/health"));
  roundtrip(get("/v1/does-not-exist"));
  roundtrip(post("/v1/chat/completions", "{bad"));
  ParsedResponse r = roundtrip(get("/metrics"));
  ASSERT_EQ(r.status, 200);
  const auto p = testing::parse_prometheus_text(r.body);
  ASSERT_TRUE(p.errors.empty()) << p.errors.front() << "\n" << r.body;
  EXPECT_EQ(
      p.value("deepinfer:http_requests_total", {{"route", "/health"}, {"method", "GET"}, {"status", "200"}}),
      3);
  EXPECT_EQ(p.value("deepinfer:http_requests_total",
                    {{"route", "unmatched"}, {"method", "GET"}, {"status", "404"}}),
            1);
  EXPECT_EQ(p.value("deepinfer:http_requests_total",
                    {{"route", "/v1/chat/completions"}, {"method", "POST"}, {"status", "400"}}),
            1);
  EXPECT_EQ(p.value("deepinfer:http_request_duration_seconds_count", {{"route", "/health"}}), 3);
  EXPECT_EQ(p.types.at("deepinfer:num_requests_running"), "gauge");
}

TEST_F(HttpServerTest, ShutdownLetsInFlightResponsesFinish) {
  ServerConfig config;
  config.drain_timeout = 3s;
  start(config);
  auto parked = probe_.parked.get_future();
  RawConnection busy = connect();
  ASSERT_TRUE(busy.send_all(post("/park", "{}")));
  ASSERT_EQ(parked.wait_for(5s), std::future_status::ready);
  auto channel = parked.get();
  RawConnection idle = connect();
  std::thread answer([channel] {
    std::this_thread::sleep_for(200ms);
    channel->send(200, "text/plain", "finished during drain");
  });
  const auto t0 = std::chrono::steady_clock::now();
  server_->shutdown();
  answer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  auto r = busy.read_response(2s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "finished during drain");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(idle.wait_closed(2s));
  EXPECT_FALSE(RawConnection::connect_local(server_->port()).ok()) << "still accepting after shutdown";
}

TEST_F(HttpServerTest, ShutdownCutsOffStuckResponsesAndHandlersOutliveTheServer) {
  ServerConfig config;
  config.drain_timeout = 200ms;
  start(config);
  auto parked = probe_.parked.get_future();
  auto closed = probe_.parked_closed.get_future();
  RawConnection busy = connect();
  ASSERT_TRUE(busy.send_all(post("/park", "{}")));
  ASSERT_EQ(parked.wait_for(5s), std::future_status::ready);
  auto channel = parked.get();
  server_.reset();  // destructor = graceful shutdown
  ASSERT_EQ(closed.wait_for(1s), std::future_status::ready);
  EXPECT_TRUE(channel->closed());
  // The engine may still hold the channel after the server is gone: every call is a no-op.
  channel->start_stream();
  channel->write_event("late");
  channel->end_stream();
  // Work for a channel whose server is gone runs at once, on the caller's thread.
  bool ran_here = false;
  const std::thread::id caller = std::this_thread::get_id();
  channel->run_in_order([&] { ran_here = std::this_thread::get_id() == caller; });
  EXPECT_TRUE(ran_here);
  channel.reset();
  EXPECT_TRUE(busy.wait_closed(2s));
}

TEST(HttpServerConfig, HostMustBeExplicitAndAnAddress) {
  RouteTable router;
  ServerConfig config;
  auto no_host = HttpServer::start(config, router, Logger(LogLevel::off), nullptr);
  ASSERT_FALSE(no_host.ok());
  EXPECT_EQ(no_host.status().code(), ErrorCode::invalid_argument);
  config.host = "example.com";
  EXPECT_FALSE(HttpServer::start(config, router, Logger(LogLevel::off), nullptr).ok());
  config.host = "127.0.0.1";
  auto first = HttpServer::start(config, router, Logger(LogLevel::off), nullptr);
  ASSERT_TRUE(first.ok());
  config.port = (*first)->port();
  auto clash = HttpServer::start(config, router, Logger(LogLevel::off), nullptr);
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), ErrorCode::io_error);
}

}  // namespace
}  // namespace ds::server
