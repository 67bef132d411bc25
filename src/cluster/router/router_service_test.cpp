// RouterService over loopback with in-process HTTP workers (test doubles built on the real HttpServer):
// readiness without workers, the no-worker 503 in each API's shape, a 429 retried on the next worker, and
// an SSE stream relayed byte for byte. Links ds_cluster_router without the engine or the model.
#include "cluster/router/router_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "http/http_server.h"
#include "http/test_http_client.h"

namespace ds::cluster {
namespace {

using server::testing::RawConnection;

server::ServerConfig loopback() {
  server::ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.drain_timeout = std::chrono::milliseconds(200);
  return c;
}

std::unique_ptr<server::HttpServer> serve(server::RouteTable routes) {
  auto s = server::HttpServer::start(loopback(), std::move(routes), Logger(LogLevel::error), nullptr);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

std::optional<server::testing::ParsedResponse> request(uint16_t port, const std::string& method,
                                                       const std::string& path,
                                                       const std::string& body = "") {
  RawConnection c = RawConnection::connect_local(port);
  if (!c.ok()) return std::nullopt;
  c.send_all(method + " " + path +
             " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  return c.read_response(std::chrono::seconds(10));
}

// A worker double: /health, and a chat route that either refuses with 503 or streams fixed events.
std::unique_ptr<server::HttpServer> fake_worker(bool overloaded) {
  server::RouteTable routes;
  const server::RouteOptions open{server::ErrorStyle::openai, server::RouteAccess::operational};
  EXPECT_TRUE(routes
                  .add("GET", "/health", open,
                       [](server::ServerRequest, auto out) { out->send_json(200, R"({"status":"ok"})"); })
                  .ok());
  EXPECT_TRUE(
      routes
          .add("POST", "/v1/chat/completions", open,
               [overloaded](server::ServerRequest, auto out) {
                 if (overloaded) {
                   out->send_error(Status(ErrorCode::engine_overloaded, "queue full"));
                   return;
                 }
                 out->start_stream();
                 std::thread(
                     [out] {  // events in separate writes, some time apart, as an engine would send them
                       for (int i = 0; i < 5; ++i) {
                         out->write_event(nlohmann::json{
                             {"i", i}, {"text", std::string(static_cast<size_t>(100 * i), 'x')}}
                                              .dump());
                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                       }
                       out->write_event("[DONE]");
                       out->end_stream();
                     })
                     .detach();
               })
          .ok());
  return serve(std::move(routes));
}

RouterServiceConfig config_for(std::vector<std::string> urls) {
  RouterServiceConfig c;
  for (const auto& u : urls) c.workers.push_back(*parse_worker_url(u, "test"));
  c.routing.policy = PolicyKind::round_robin;
  c.health.period = std::chrono::milliseconds(50);
  c.health.timeout = std::chrono::milliseconds(300);
  return c;
}

TEST(RouterService, NoUsableWorkerAnswers503InTheApisShape) {
  // Port 1 on loopback: nothing listens there, every connect is refused.
  auto service = RouterService::start(config_for({"http://127.0.0.1:1"}));
  ASSERT_TRUE(service.ok()) << service.status().message();
  server::RouteTable routes;
  ASSERT_TRUE((*service)->add_routes(routes).ok());
  auto http = serve(std::move(routes));
  auto health = request(http->port(), "GET", "/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = request(http->port(), "GET", "/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->header("retry-after"), "1");
  auto chat = request(http->port(), "POST", "/v1/chat/completions", R"({"model":"m","messages":[]})");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_EQ(nlohmann::json::parse(chat->body)["error"]["code"], "no_worker_available");
  auto messages = request(http->port(), "POST", "/v1/messages", R"({"model":"m","messages":[]})");
  ASSERT_TRUE(messages);
  EXPECT_EQ(messages->status, 503);
  EXPECT_EQ(nlohmann::json::parse(messages->body)["type"], "error");  // Anthropic's shape
  auto metrics = request(http->port(), "GET", "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("deepinfer_router:no_worker_total 2"), std::string::npos) << metrics->body;
  http->shutdown();
}

TEST(RouterService, RetriesA429OnTheNextWorkerAndRelaysTheStreamByteForByte) {
  auto busy = fake_worker(/*overloaded=*/true);
  auto good = fake_worker(/*overloaded=*/false);
  auto service = RouterService::start(config_for({"http://127.0.0.1:" + std::to_string(busy->port()),
                                                  "http://127.0.0.1:" + std::to_string(good->port())}));
  ASSERT_TRUE(service.ok()) << service.status().message();
  ASSERT_EQ((*service)->n_usable_workers(), 2u);  // start() polled once
  server::RouteTable routes;
  ASSERT_TRUE((*service)->add_routes(routes).ok());
  auto http = serve(std::move(routes));

  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})";
  auto direct = request(good->port(), "POST", "/v1/chat/completions", body);
  ASSERT_TRUE(direct);
  // Round robin starts at the busy worker: its 429 is retried on the good one before any byte went out.
  auto routed = request(http->port(), "POST", "/v1/chat/completions", body);
  ASSERT_TRUE(routed);
  EXPECT_EQ(routed->status, 200);
  EXPECT_EQ(routed->header("content-type"), direct->header("content-type"));
  EXPECT_EQ(routed->body, direct->body);  // the SSE bytes exactly
  EXPECT_EQ(server::testing::parse_sse(routed->body).size(), 6u);
  auto metrics = request(http->port(), "GET", "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("deepinfer_router:retries_total 1"), std::string::npos) << metrics->body;
  http->shutdown();
}

// A worker double that answers with the client address it saw (one address = one TCP connection),
// as JSON or, with "stream", as two SSE events.
struct EchoWorker {
  std::mutex mu;
  std::set<std::string> remotes;
  std::unique_ptr<server::HttpServer> http;
  size_t n_connections() {
    std::lock_guard lock(mu);
    return remotes.size();
  }
};

std::unique_ptr<EchoWorker> echo_worker(std::chrono::milliseconds idle_timeout) {
  auto w = std::make_unique<EchoWorker>();
  server::RouteTable routes;
  const server::RouteOptions open{server::ErrorStyle::openai, server::RouteAccess::operational};
  EXPECT_TRUE(routes
                  .add("GET", "/health", open,
                       [](server::ServerRequest, auto out) { out->send_json(200, R"({"status":"ok"})"); })
                  .ok());
  EXPECT_TRUE(routes
                  .add("POST", "/v1/chat/completions", open,
                       [p = w.get()](server::ServerRequest req, auto out) {
                         {
                           std::lock_guard lock(p->mu);
                           p->remotes.insert(req.remote_addr);
                         }
                         const std::string answer = nlohmann::json{{"remote", req.remote_addr}}.dump();
                         if (req.body.find("\"stream\":true") == std::string::npos) {
                           out->send_json(200, answer);
                           return;
                         }
                         out->start_stream();
                         out->write_event(answer);
                         out->write_event("[DONE]");
                         out->end_stream();
                       })
                  .ok());
  server::ServerConfig c = loopback();
  c.idle_timeout = idle_timeout;
  auto s = server::HttpServer::start(c, std::move(routes), Logger(LogLevel::error), nullptr);
  EXPECT_TRUE(s.ok()) << s.status().message();
  w->http = std::move(s).value();
  return w;
}

std::string metric_line(uint16_t port, const std::string& prefix) {
  auto m = request(port, "GET", "/metrics");
  if (!m) return "";
  const size_t at = m->body.find(prefix);
  return at == std::string::npos ? "" : m->body.substr(at, m->body.find('\n', at) - at);
}

// Sequential requests, streamed and not, through the router; returns how many connections the worker saw.
size_t connections_for(size_t max_idle, std::chrono::milliseconds worker_idle_timeout,
                       std::chrono::milliseconds pause, std::string* reused_metric) {
  auto worker = echo_worker(worker_idle_timeout);
  RouterServiceConfig config = config_for({"http://127.0.0.1:" + std::to_string(worker->http->port())});
  config.connections.max_idle_per_worker = max_idle;
  auto service = RouterService::start(std::move(config));
  EXPECT_TRUE(service.ok()) << service.status().message();
  server::RouteTable routes;
  EXPECT_TRUE((*service)->add_routes(routes).ok());
  auto http = serve(std::move(routes));
  for (int i = 0; i < 6; ++i) {
    const bool stream = i % 2 == 1;
    const std::string body = std::string(R"({"model":"m","messages":[{"role":"user","content":"hi"}])") +
                             (stream ? R"(,"stream":true})" : "}");
    auto r = request(http->port(), "POST", "/v1/chat/completions", body);
    EXPECT_TRUE(r && r->status == 200) << i;
    if (r) {
      EXPECT_NE(r->body.find("\"remote\":\"127.0.0.1:"), std::string::npos) << r->body;
      EXPECT_EQ(server::testing::parse_sse(r->body).size(), stream ? 2u : 0u) << r->body;
    }
    std::this_thread::sleep_for(pause);
  }
  *reused_metric = metric_line(http->port(), "deepinfer_router:worker_connections_total{event=\"reused\"}");
  http->shutdown();
  service->reset();
  worker->http->shutdown();
  return worker->n_connections();
}

TEST(RouterService, ReusesKeptAliveWorkerConnections) {
  std::string reused;
  // One connection for six requests, streams included.
  EXPECT_EQ(connections_for(32, std::chrono::seconds(60), std::chrono::milliseconds(0), &reused), 1u);
  EXPECT_EQ(reused, "deepinfer_router:worker_connections_total{event=\"reused\"} 5");
  // No pool: a connection per request.
  EXPECT_EQ(connections_for(0, std::chrono::seconds(60), std::chrono::milliseconds(0), &reused), 6u);
  EXPECT_EQ(reused, "deepinfer_router:worker_connections_total{event=\"reused\"} 0");
  // The worker closes idle connections before the next request: every request still succeeds, on a new one.
  EXPECT_EQ(connections_for(32, std::chrono::milliseconds(50), std::chrono::milliseconds(200), &reused), 6u);
}

}  // namespace
}  // namespace ds::cluster
