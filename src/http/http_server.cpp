#include "http/http_server.h"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "http/http_session.h"

namespace ds::server {
using boost::system::error_code;

// The listening socket and its accept loop (on its own strand).
struct HttpServer::Acceptor : std::enable_shared_from_this<HttpServer::Acceptor> {
  Acceptor(ServerCore& c, tcp::acceptor a)
      : core(c), acceptor(std::move(a)), backoff(acceptor.get_executor()) {}

  void accept() {
    acceptor.async_accept(
        net::make_strand(core.ioc),
        [self = shared_from_this()](error_code ec, tcp::socket s) { self->on_accept(ec, std::move(s)); });
  }

  void on_accept(error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || core.shutting_down.load(std::memory_order_acquire)) return;
    if (ec) {
      // Typically EMFILE/ENFILE: back off instead of spinning on a listening socket that stays readable.
      core.log.log(LogLevel::warn, "accept failed: {}", ec.message());
      backoff.expires_after(std::chrono::milliseconds(100));
      backoff.async_wait([self = shared_from_this()](error_code) { self->accept(); });
      return;
    }
    size_t n_open = 0;
    {
      std::lock_guard lock(core.sessions_mu);
      n_open = core.sessions.size();
    }
    auto session = std::make_shared<Session>(core, std::move(socket));
    if (n_open >= core.config.max_connections) {
      session->reject_overloaded();
    } else {
      session->start();
    }
    accept();
  }

  void close() {
    net::post(acceptor.get_executor(), [self = shared_from_this()] {
      error_code ec;
      self->acceptor.close(ec);
      self->backoff.cancel();
    });
  }

  ServerCore& core;
  tcp::acceptor acceptor;
  net::steady_timer backoff;
};

Result<std::unique_ptr<HttpServer>> HttpServer::start(ServerConfig config, RouteTable router, Logger log,
                                                      ServingMetrics* metrics) {
  DS_TRY(validate_server_config(config));
  error_code ec;
  const std::string host = config.host == "localhost" ? "127.0.0.1" : config.host;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("server host '{}' is not an IP address (e.g. 127.0.0.1 or ::1)", config.host));
  }
  auto core = std::make_unique<ServerCore>(std::move(config), std::move(router), log, metrics);
  const tcp::endpoint endpoint(address, core->config.port);
  tcp::acceptor acceptor(net::make_strand(core->ioc));
  auto fail = [&](const char* what) {
    return Status(ErrorCode::io_error, fmt::format("cannot {} {}:{}: {}", what, core->config.host,
                                                   core->config.port, ec.message()));
  };
  if (acceptor.open(endpoint.protocol(), ec); ec) return fail("open a socket for");
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) return fail("set SO_REUSEADDR on");
  if (acceptor.bind(endpoint, ec); ec) return fail("bind");
  if (acceptor.listen(core->config.listen_backlog, ec); ec) return fail("listen on");
  const uint16_t port = acceptor.local_endpoint(ec).port();
  if (ec) return fail("read the local port of");

  std::unique_ptr<HttpServer> server(new HttpServer(std::move(core), port));
  server->acceptor_ = std::make_shared<Acceptor>(*server->core_, std::move(acceptor));
  server->acceptor_->accept();
  server->run_threads(server->core_->config.n_io_threads);
  server->core_->log.log(LogLevel::info, "listening on {}:{} ({} io thread(s))", server->core_->config.host,
                         port, server->core_->config.n_io_threads);
  return server;
}

HttpServer::HttpServer(std::unique_ptr<ServerCore> core, uint16_t port)
    : core_(std::move(core)), port_(port) {}

HttpServer::~HttpServer() { shutdown(); }

void HttpServer::run_threads(int n) {
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] {
      // Handlers catch their own exceptions; one escaping here is a bug, and a silent dead io thread
      // would be worse than the abort std::thread gives it.
      core_->ioc.run();
    });
  }
}

size_t HttpServer::n_open_connections() const {
  std::lock_guard lock(core_->sessions_mu);
  return core_->sessions.size();
}

void HttpServer::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  ServerCore& core = *core_;
  core.shutting_down.store(true, std::memory_order_release);
  acceptor_->close();

  auto live_sessions = [&core] {
    std::vector<std::shared_ptr<Session>> out;
    std::lock_guard lock(core.sessions_mu);
    for (auto& [ptr, weak] : core.sessions) {
      if (auto s = weak.lock()) out.push_back(std::move(s));
    }
    return out;
  };
  auto wait_until_empty = [&core](std::chrono::milliseconds limit) {
    std::unique_lock lock(core.sessions_mu);
    return core.sessions_cv.wait_for(lock, limit, [&core] { return core.sessions.empty(); });
  };

  // Phase 1: idle connections close now, in-flight responses may finish.
  for (auto& s : live_sessions()) s->begin_shutdown();
  if (!wait_until_empty(core.config.drain_timeout)) {
    // Phase 2: cut the rest off; their handlers hear about it through on_close.
    const auto rest = live_sessions();
    core.log.log(LogLevel::warn,
                 "shutdown: {} connection(s) still busy after the drain timeout; closing them", rest.size());
    for (const auto& s : rest) s->abort();
  }
  wait_until_empty(std::chrono::milliseconds(1000));
  core.ioc.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  {
    std::lock_guard lock(core.liveness->mu);
    core.liveness->alive = false;  // channels still held by handlers post nothing from now on
  }
  for (auto& s : live_sessions()) s->release_after_stop();
  core.log.log(LogLevel::info, "server on port {} stopped", port_);
}

}  // namespace ds::server
